/**
 * Named crash points (test-only, off unless CRASH_POINTS names them): the
 * process SIGKILLs itself there, so tests can prove recovery from exactly that
 * instant. `CRASH_POINTS=after_decision` or `after_decision@2` (only at step 2).
 */
export const CRASH_POINT_NAMES = [
  'after_decision',
  'after_reservation',
  'after_dispatched',
  'after_call',
  'after_outcome',
  'before_commit',
  'after_commit',
  'during_grace',
] as const;
export type CrashPointName = (typeof CRASH_POINT_NAMES)[number];

export class CrashPoints {
  private readonly armed: { name: string; step?: number }[];

  constructor(spec: readonly string[], private readonly kill: () => void = () => process.kill(process.pid, 'SIGKILL')) {
    this.armed = spec.map((s) => {
      const [name, step] = s.split('@');
      return { name: name!, ...(step ? { step: Number(step) } : {}) };
    });
  }

  hit(name: CrashPointName, step?: number): void {
    if (this.armed.length === 0) return;
    if (this.armed.some((a) => a.name === name && (a.step === undefined || a.step === step))) this.kill();
  }
}
