/**
 * Stage 1b, wake, under flow control: a run woken from a wait gave its slot back when it parked, so its step runs
 * only once it holds one again (src/flow/admission.ts, `wake`: at the front of its tenant's line, under the same
 * tenant, agent and fleet limits as any run, and why that is fair). Asked after the wait's result is read and
 * before wakeRun makes the run `running`: a run waiting for its slot stays parked (sleeping, waiting_event,
 * waiting_child) with its wake job delayed until the run's deadline, and its admission releases the job.
 *
 * If the process dies after the run was put in line, before the job was delayed, the job is redelivered (owner
 * watch, stall) and asks again: still in line, it is delayed again; admitted meanwhile, it goes on. An admission
 * that meets the job still active cannot release it: after the delay the job is released here if the run holds
 * its slot by then (`wokenWaits`), and an admission after that finds it delayed.
 */
import { DelayedError } from 'bullmq';
import type { StepEnv } from './env.js';
import type { StepState } from './state.js';

export async function takeWakeSlot(env: StepEnv, state: StepState, now: number): Promise<void> {
  const admission = env.admission;
  if (!admission?.wake) return;
  const { runId, spec } = state;
  const run = { runId, tenant: spec.tenant, agent: spec.agent, jobId: state.job.id };
  const { deadlineAt } = spec.limits;
  if (now >= deadlineAt) {
    // Its wall clock is spent: the step only ends the run (budget_exceeded, before any model call), so it does not
    // wait for a slot it would not use; out of its line, it ends without one.
    await admission.withdraw?.(runId);
    return;
  }
  if ((await admission.wake(run, now)) === 'held') return;
  await state.job.delay(deadlineAt);
  await admission.wokenWaits?.(run);
  state.log.info({ code: 'wake_waits_for_slot' }, 'woken run waits in its line for a slot');
  throw new DelayedError();
}
