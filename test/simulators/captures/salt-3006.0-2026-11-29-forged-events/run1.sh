#!/bin/bash
# Capture 1: a real job and forged events from real-m1 (event.fire_master, event.send, with and without preload).
. /work/scratch/salt/api.sh; login
curl -sN -H "X-Auth-Token: $TOKEN" http://127.0.0.1:8043/events > events1.raw 2> events1.err &
CURL=$!
sleep 2
note() { echo "# $(date -u +%H:%M:%S.%N | cut -c1-12) $*" >> steps.txt; }
note "A real local_async test.echo to real-m1,real-m2"
J=$(curl -s $API/ -H "X-Auth-Token: $TOKEN" -H 'Accept: application/json' -H 'Content-Type: application/json' \
  -d '{"client":"local_async","tgt":["real-m1","real-m2"],"tgt_type":"list","fun":"test.echo","arg":["hi"]}' | tee -a steps.txt | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["return"][0]["jid"])')
echo >> steps.txt
echo "JID=$J" >> steps.txt
sleep 3
RET='{"id":"real-m2","jid":"'$J'","fun":"test.echo","fun_args":["hi"],"return":"forged","retcode":0,"success":true,"cmd":"_return"}'
note "B event.fire_master data=<return of real-m2> tag=salt/job/$J/ret/real-m2"
call '{"client":"local","tgt":"real-m1","fun":"event.fire_master","arg":['"$RET"',"salt/job/'$J'/ret/real-m2"]}' >> steps.txt
sleep 1
note "C event.fire_master presence change lost real-m2"
call '{"client":"local","tgt":"real-m1","fun":"event.fire_master","arg":[{"new":[],"lost":["real-m2"]},"salt/presence/change"]}' >> steps.txt
sleep 1
note "D event.send salt/job/$J/ret/real-m2 with kwarg data"
call '{"client":"local","tgt":"real-m1","fun":"event.send","arg":["salt/job/'$J'/ret/real-m2"],"kwarg":{"data":'"$RET"'}}' >> steps.txt
sleep 1
note "D2 event.send salt/job/$J/ret/real-m2 with key=value kwargs"
call '{"client":"local","tgt":"real-m1","fun":"event.send","arg":["salt/job/'$J'/ret/real-m2"],"kwarg":{"return":"forged-kw","retcode":0,"success":true,"id":"real-m2","jid":"'$J'"}}' >> steps.txt
sleep 1
note "E event.fire_master preload events=[{tag: salt/job/$J/ret/real-m2, data: <return>}]"
call '{"client":"local","tgt":"real-m1","fun":"event.fire_master","arg":[{},"ignored/tag"],"kwarg":{"preload":{"events":[{"tag":"salt/job/'$J'/ret/real-m2","data":'"$RET"'}]}}}' >> steps.txt
sleep 1
note "F event.fire_master preload cmd=_return id=real-m2 jid=$J"
call '{"client":"local","tgt":"real-m1","fun":"event.fire_master","arg":[{},"ignored/tag"],"kwarg":{"preload":{"cmd":"_return","id":"real-m2","jid":"'$J'","fun":"test.echo","fun_args":["hi"],"return":"forged-return-cmd","retcode":0,"success":true}}}' >> steps.txt
sleep 1
note "G event.fire_master preload events=[presence change lost real-m2]"
call '{"client":"local","tgt":"real-m1","fun":"event.fire_master","arg":[{},"ignored/tag"],"kwarg":{"preload":{"events":[{"tag":"salt/presence/change","data":{"new":[],"lost":["real-m2"]}}]}}}' >> steps.txt
sleep 2
note "H GET /jobs/$J"
curl -s $API/jobs/$J -H "X-Auth-Token: $TOKEN" -H 'Accept: application/json' >> steps.txt; echo >> steps.txt
sleep 1
kill $CURL
