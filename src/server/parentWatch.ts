/**
 * A process started by another one with an IPC channel (the demo's workers) leaves when that parent dies, however it
 * dies: SIGKILL included, which the parent cannot pass on. The kernel closes the channel with the parent, and the
 * channel's 'disconnect' is the signal. A process started without one (a deployment, a test's spawnWorker) is
 * untouched. The channel does not keep the process alive.
 */
export function leaveWithParent(leave: () => void): void {
  if (!process.channel) return;
  process.channel.unref();
  process.once('disconnect', leave);
}
