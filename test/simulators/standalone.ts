/**
 * How a simulator runs on its own (`npm run sim:*`): its `main` starts it and answers how to stop it;
 * SIGINT or SIGTERM stops it and exits 0, a failed start exits 1.
 */
export function runStandalone(main: () => Promise<() => Promise<void>>): void {
	main().then(
		stop => {
			const shutdown = () => void stop().then(() => process.exit(0));
			process.once("SIGINT", shutdown);
			process.once("SIGTERM", shutdown);
		},
		err => {
			console.error(err);
			process.exit(1);
		},
	);
}
