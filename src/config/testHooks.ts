/**
 * Every test switch a production module obeys is read here, and only here:
 * crash and pause points, the negative control that disables idempotency, and
 * whether the scripted model (and run-supplied scripts) may be used. A
 * production module is given the decision (a CrashPoints, a boolean), never
 * the configuration key; APP_MODE=production refuses every one of them
 * (src/config/config.ts).
 *
 * Named crash points (test-only, off unless CRASH_POINTS names them): the
 * process SIGKILLs itself there, so tests can prove recovery from exactly that
 * instant. `CRASH_POINTS=after_decision` or `after_decision@2` (only at step 2).
 * PAUSE_POINTS=`after_dispatched@2=2500` instead blocks the event loop there for
 * 2.5 s and goes on: a false stall, with the lock left to expire.
 * `after_decision@2=stop` stops the process there (SIGSTOP) until a test sends it
 * SIGCONT: a stall that ends when the test has done what it must do first (fail a
 * store over, freeze replicas), however long that takes on a loaded machine, where
 * a timed pause could end before it.
 */
export const CRASH_POINT_NAMES = [
  'after_decision',
  'mid_stream',
  'after_observation',
  'after_child_started',
  'before_child_resume',
  'after_reservation',
  'after_dispatched',
  'after_call',
  'after_outcome',
  'before_commit',
  'after_commit',
  'during_grace',
] as const;
export type CrashPointName = (typeof CRASH_POINT_NAMES)[number];

interface Armed {
  name: string;
  step?: number;
  /** A pause: milliseconds, or `stop` (until SIGCONT). */
  pause?: number | 'stop';
}

function parse(spec: string): Armed {
  const [point, pause] = spec.split('=');
  const [name, step] = point!.split('@');
  return {
    name: name!,
    ...(step ? { step: Number(step) } : {}),
    ...(pause ? { pause: pause === 'stop' ? 'stop' : Number(pause) } : {}),
  };
}

export class CrashPoints {
  private readonly armed: Armed[];

  constructor(
    spec: readonly string[],
    private readonly kill: () => void = () => process.kill(process.pid, 'SIGKILL'),
    pauses: readonly string[] = [],
    private readonly stop: () => void = () => process.kill(process.pid, 'SIGSTOP'),
  ) {
    this.armed = [
      ...spec.map(parse).map(({ pause: _ignored, ...a }) => a),
      ...pauses.map(parse).filter((p) => p.pause),
    ];
  }

  static fromConfig(cfg: { CRASH_POINTS: readonly string[]; PAUSE_POINTS: readonly string[] }): CrashPoints {
    return new CrashPoints(cfg.CRASH_POINTS, undefined, cfg.PAUSE_POINTS);
  }

  hit(name: CrashPointName, step?: number): void {
    if (this.armed.length === 0) return;
    const a = this.armed.find((x) => x.name === name && (x.step === undefined || x.step === step));
    if (!a) return;
    if (a.pause === undefined) return this.kill();
    this.armed.splice(this.armed.indexOf(a), 1); // once: a redelivery to this process runs normally
    if (a.pause === 'stop') return this.stop(); // the process goes on from here once it is sent SIGCONT
    const until = Date.now() + a.pause;
    while (Date.now() < until) {
      /* a synchronous stall on purpose: timers, lock renewals and sockets all wait */
    }
  }
}

/** The configuration keys the test switches come from (a structural subset of Config: this module imports nothing). */
export interface TestSwitches {
  APP_MODE: string;
  CRASH_POINTS: readonly string[];
  PAUSE_POINTS: readonly string[];
  UNSAFE_DISABLE_IDEMPOTENCY: boolean;
  SCRIPTED_MODEL_ENABLED?: boolean | undefined;
}

/** A process's test hooks, decided once from its configuration. */
export interface TestHooks {
  crash: CrashPoints;
  /** Negative control of the chaos campaign: write tools bypass the ledger (a blind send every time). */
  unsafeDisableIdempotency: boolean;
  /** The scripted model, and run-supplied scripts, may be used. */
  scriptedModelAllowed: boolean;
}

export function testHooksFrom(cfg: TestSwitches): TestHooks {
  return {
    crash: CrashPoints.fromConfig(cfg),
    unsafeDisableIdempotency: cfg.UNSAFE_DISABLE_IDEMPOTENCY,
    scriptedModelAllowed: scriptedModelAllowed(cfg),
  };
}

/**
 * True when the scripted provider, and so run-supplied scripts, may be used: development only (on unless
 * SCRIPTED_MODEL_ENABLED=false).
 */
export function scriptedModelAllowed(cfg: Pick<TestSwitches, 'APP_MODE' | 'SCRIPTED_MODEL_ENABLED'>): boolean {
  return cfg.APP_MODE === 'development' && cfg.SCRIPTED_MODEL_ENABLED !== false;
}
