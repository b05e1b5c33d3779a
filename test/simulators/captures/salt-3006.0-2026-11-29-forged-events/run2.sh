#!/bin/bash
# Capture 2: preload forms. G raw presence via preload events; F2 a _return with a spoofed id and a string tok,
# for a job real-m2 has not answered yet (test.sleep 15), then the job cache.
. /work/scratch/salt/api.sh; login
curl -sN -H "X-Auth-Token: $TOKEN" http://127.0.0.1:8043/events > events2.raw 2> events2.err &
CURL=$!
sleep 2
note() { echo "# $(date -u +%H:%M:%S.%N | cut -c1-12) $*" >> steps2.txt; }
note "G event.fire_master preload events=[presence change lost real-m2]"
call '{"client":"local","tgt":"real-m1","fun":"event.fire_master","arg":[{},"ignored/tag"],"kwarg":{"preload":{"events":[{"tag":"salt/presence/change","data":{"new":[],"lost":["real-m2"]}}]}}}' >> steps2.txt
sleep 1
note "S local_async test.sleep 15 on real-m2"
J=$(curl -s $API/ -H "X-Auth-Token: $TOKEN" -H 'Accept: application/json' -H 'Content-Type: application/json' \
  -d '{"client":"local_async","tgt":["real-m2"],"tgt_type":"list","fun":"test.sleep","arg":[15]}' | tee -a steps2.txt | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["return"][0]["jid"])')
echo >> steps2.txt; echo "JID=$J" >> steps2.txt
sleep 1
note "F2 event.fire_master preload cmd=_return id=real-m2 jid=$J tok=<string>"
call '{"client":"local","tgt":"real-m1","fun":"event.fire_master","arg":[{},"ignored/tag"],"kwarg":{"preload":{"cmd":"_return","id":"real-m2","tok":"x","jid":"'$J'","fun":"test.sleep","fun_args":[15],"return":"forged-return-cmd","retcode":0,"success":true}}}' >> steps2.txt
sleep 2
note "H GET /jobs/$J (before real-m2 answers)"
curl -s $API/jobs/$J -H "X-Auth-Token: $TOKEN" -H 'Accept: application/json' >> steps2.txt; echo >> steps2.txt
sleep 14
note "H2 GET /jobs/$J (after real-m2 answered)"
curl -s $API/jobs/$J -H "X-Auth-Token: $TOKEN" -H 'Accept: application/json' >> steps2.txt; echo >> steps2.txt
sleep 1
kill $CURL
