/**
 * `npm run repl`: the REPL as its own small process that attaches to a running fleet-ctl through its HTTP API
 * (CTL_API_URL, default this machine's PORT): it runs no service, opens no data, listens on no port and joins no
 * cluster (its broker has no transporter, so it needs no NATS credentials and cannot call an action behind the
 * gateway's back), so it works next to `npm start` (the embedded default included) as well as against a cluster
 * through its gateway. Logs below warnings stay quiet: nothing is printed over the prompt.
 */
import os from "node:os";
import type { REPLServer } from "node:repl";
import { ServiceBroker, type BrokerOptions } from "moleculer";
import { refuseBadStart } from "../runtime/first-screen";
import { useConfig } from "../config";
import { replCommands } from "./commands";

// Loaded once, here; the commands read it from the broker.
const config = refuseBadStart();
let server: REPLServer | undefined;

const broker = new ServiceBroker({
	nodeID: `repl-${os.hostname()}-${process.pid}`,
	transporter: null,
	logger: { type: "Console", options: { formatter: "short", colors: process.stdout.isTTY, moduleColors: false } },
	logLevel: (config.broker.logLevel || "warn") as BrokerOptions["logLevel"],
	replOptions: { delimiter: "fleet-ctl $", customCommands: replCommands(() => server) as never },
});

useConfig(broker, config);

void broker.start().then(
	() => {
		console.log(
			`fleet-ctl REPL: talking to ${config.replApiUrl}${config.replOperatorToken ? "" : " (no token: `login <token>` first)"}. \`help\` lists the commands, Ctrl-D leaves.`,
		);
		server = broker.repl() as REPLServer | undefined;
	},
	(err: Error) => {
		process.stderr.write(`fleet-ctl REPL cannot start: ${err.message}\n`);
		process.exit(1);
	},
);
