/**
 * Configuration in three stages: raw environment -> zod schema with documented
 * defaults (units in the names) -> frozen object. Nothing else reads process.env.
 * A bad value fails at boot with the field named (ConfigError).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { priceEntrySchema } from '../core/prices.js';
import { HARD_LIMITS } from '../core/limits.js';
import { PROVIDER_NAMES } from '../core/providerNames.js';
import { ConfigError } from '../core/errors.js';
import { agentModelChoiceSchema } from '../core/model.js';
import { AGENT_NAME_FORMAT } from '../core/agentName.js';
import { FLOW_WEIGHT_MAX, FLOW_WEIGHT_MIN } from '../core/flowWeight.js';
import { tenantNameSchema } from '../core/tenant.js';

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');
const int = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);
/** A JSON value in an env var, validated by `schema`. */
const json = <T extends z.ZodType>(schema: T, def: z.input<T>) =>
  z
    .string()
    .default(JSON.stringify(def))
    .transform((s, ctx) => {
      try {
        return JSON.parse(s) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be JSON' });
        return z.NEVER;
      }
    })
    .pipe(schema);
const csv = z
  .string()
  .default('')
  .transform((s) =>
    s
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean),
  );

/** One operator of OPERATORS / OPERATORS_FILE: the token itself is never configured, only its sha256. */
export const operatorEntrySchema = z
  .object({
    name: z.string().regex(/^[\w.@+-]{1,100}$/, 'name: 1-100 letters, digits or _ . @ + -'),
    tokenSha256: z.string().regex(/^[0-9a-f]{64}$/, 'tokenSha256: 64 lowercase hex digits'),
    role: z.enum(['viewer', 'operator']),
    // "*" alone is every tenant; inside a list it would be the any-tenant search index's name (src/core/tenant.ts).
    tenants: z.union([z.literal('*'), z.array(tenantNameSchema()).min(1)]),
  })
  .strict();
export type OperatorEntry = z.infer<typeof operatorEntrySchema>;

export const configSchema = z.object({
  /**
   * development allows the scripted model, run-supplied scripts, short secrets and an open /metrics, and says so at
   * boot (`development_mode`, a warning); production refuses them. Unset: production when NODE_ENV=production, else
   * development.
   */
  APP_MODE: z.enum(['development', 'production']).default('development'),
  /**
   * redis://host:port. The api, worker and reconciler need it (or REDIS_CLUSTER_NODES / REDIS_SENTINELS); only the demo
   * (`npm start`) and the tests start a redis-server of their own when it is unset.
   */
  REDIS_URL: z.url().optional(),
  /** host:port,host:port of a Redis Cluster; takes precedence over REDIS_URL. */
  REDIS_CLUSTER_NODES: csv,
  /**
   * host:port,host:port of Redis Sentinels watching the master named REDIS_SENTINEL_MASTER; takes precedence over
   * REDIS_URL (REDIS_CLUSTER_NODES over both). Clients ask the sentinels for the master and follow a failover.
   */
  REDIS_SENTINELS: csv,
  /** The master name the Sentinels watch (with REDIS_SENTINELS). */
  REDIS_SENTINEL_MASTER: z
    .string()
    .regex(/^[\w.-]{1,100}$/)
    .default('mymaster'),
  /** The password of the sentinels themselves (the master's is in REDIS_URL's or REDIS_PASSWORD). */
  REDIS_SENTINEL_PASSWORD: z.string().min(1).optional(),
  /** The master's password with REDIS_SENTINELS (with REDIS_URL it is in the URL). */
  REDIS_PASSWORD: z.string().min(1).optional(),
  /**
   * Replicas that must hold a write before it counts as acknowledged (WAIT; WAITAOF too where the server has it):
   * a run's creation before its 201, an action's decision and intent before its request leaves. 0 = a single
   * Redis, no wait. With N > 0 a write a failover could still take is not acknowledged: the API answers 503 with
   * Retry-After, a dispatch waits (the step job is delayed, no attempt counted).
   */
  REDIS_MIN_REPLICAS: int(0, 0),
  /** How long one replication wait may take, in ms (WAIT's timeout). */
  REDIS_REPLICA_WAIT_MS: int(500, 1),
  /** Retry-After (seconds) of a 503 while the store is unavailable or a write is not replicated. */
  STORE_RETRY_AFTER_S: int(2, 1),
  /** At boot, how long a process waits for Redis before it exits naming it (then reconnects forever once up). */
  REDIS_BOOT_TIMEOUT_MS: int(10000, 100),
  /** Prefix of every key this app owns (runs, journals, ledger). */
  KEY_PREFIX: z
    .string()
    .regex(/^[a-z0-9_-]+$/i)
    .default('agent'),
  /** Prefix BullMQ uses for its queue keys. */
  BULL_PREFIX: z
    .string()
    .regex(/^[a-z0-9_-]+$/i)
    .default('bull'),
  /**
   * Number of step-queue shards; a run lives on shard hash(runId) % SHARDS. Unset: 1 on a single Redis, 16 on a
   * Cluster (CLUSTER_DEFAULT_SHARDS: every master of a 3 to 6 master cluster owns some; the boot says which
   * masters own none). Every process of a deployment must use the same count.
   */
  SHARDS: int(1, 1),
  /** Shards this worker consumes (empty = all). */
  WORKER_SHARDS: csv,
  /**
   * Agent versions this worker serves (the `version` of its agents, e.g. `lead-qualifier@2`); empty = the
   * version of every agent it loaded. A listed version no loaded agent has stops the worker at boot. A step
   * of a version the worker does not serve is handed back while a live worker announces that version, else
   * the run parks needs_human / version_mismatch (the version queue).
   */
  WORKER_AGENT_VERSIONS: csv,
  /** How often a worker announces the versions it serves (agent-versions registry in Redis). */
  VERSION_HEARTBEAT_MS: int(5000, 50),
  /** An announcement lives this long unless renewed: a worker gone without withdrawing counts as serving until then. */
  VERSION_TTL_MS: int(15000, 100),
  /** A step handed back for another version's worker waits this long in the delayed set before it is offered again. */
  VERSION_HANDBACK_DELAY_MS: int(250, 0),
  /** Port of the HTTP API. */
  PORT: int(3000),
  /** Address the API and the ops ports bind. */
  HOST: z.string().default('127.0.0.1'),
  /** Ops port of a worker process: /healthz, /readyz, /metrics. */
  WORKER_METRICS_PORT: int(9464),
  /** Ops port of the reconciler process: /healthz, /readyz, /metrics. */
  RECONCILER_METRICS_PORT: int(9465),
  /** Step jobs one worker process runs at once. */
  WORKER_CONCURRENCY: int(20, 1),
  /**
   * BullMQ lock. A killed worker's steps are found by the owner watch (its connection vanished), not by
   * lock expiry; the lock only bounds a frozen process (SIGSTOP, a partition): its step resumes within
   * about lock + 2 x STALLED_INTERVAL_MS. Renewed every half lock, so an event-loop pause shorter than
   * half the lock causes no second delivery.
   */
  LOCK_DURATION_MS: int(20000, 200),
  /** BullMQ's stall check period; with the lock it bounds how long a frozen process keeps a step. */
  STALLED_INTERVAL_MS: int(5000, 100),
  /**
   * Owner watch period: how often each worker asks Redis whether the connections holding active locks still exist (0 =
   * off: lock expiry alone). On a node with 16 or more owners, each worker passes owners / 8 (rounded down) times less
   * often, at a random phase, so the node still sees about 8 passes a period.
   */
  OWNER_WATCH_MS: int(100, 0),
  /**
   * Owner probe period: between two owner-watch passes, how often each worker asks only whether its two neighbours in
   * the ring of the owners the last pass found alive still are (one CLIENT LIST ID per node); one gone starts a pass at
   * once. Spread as the passes are on a node with 16 or more owners, each probe then asking about as many times more
   * neighbours. 0 = no probe.
   */
  OWNER_PROBE_MS: int(20, 0),
  /**
   * A shard whose worker started no job for this long while its queue had jobs ready (waiting, prioritized or due)
   * gets a new BullMQ worker (its fetch loop stopped, as after some failovers; src/worker/fetchWatch.ts). 0 = off.
   * Keep it well above 5 s, the longest an idle worker blocks between fetches.
   */
  FETCH_STALL_MS: int(30_000, 0),
  /** Stall redeliveries before BullMQ fails the job (the run is then marked failed). */
  MAX_STALLED_COUNT: int(10, 1),
  /**
   * SIGTERM grace: time for an in-flight dispatch to record its outcome. Keep below k8s terminationGracePeriodSeconds.
   * A worker whose Redis is unreachable for half of it leaves then (exit 1): nothing can be handed back. The API and
   * the reconciler stop their work within it too, or leave at its end (`forced_exit`, exit 1).
   */
  SHUTDOWN_GRACE_MS: int(20000, 0),
  /**
   * The module whose default (or `agents`) export lists the agents this deployment runs, or is a
   * function of { config, env } giving them: a path (relative to the working directory) or a package
   * name. Unset: the built-in src/agents/index.ts (the support agent). Loaded at boot by api, worker
   * and reconciler; a module that cannot be loaded or exports no valid agent stops the process naming it.
   */
  AGENTS_MODULE: z.string().min(1).optional(),
  /**
   * The longest the agents module may take to load (its top-level code and its `agents` function together): past
   * it the process stops naming AGENTS_MODULE, instead of waiting forever on a promise that never settles.
   */
  AGENTS_LOAD_TIMEOUT_MS: int(60000, 1),
  /**
   * The provider of runs whose agent names no model choice (defineAgent `model`), with that provider's
   * default model (OPENAI_MODEL, ANTHROPIC_MODEL, OPENAI_COMPATIBLE_MODEL): scripted (development),
   * openai, anthropic, openai-compatible.
   */
  MODEL_PROVIDER: z.enum(PROVIDER_NAMES).default('scripted'),
  /**
   * Per-tenant model choices, JSON: {"<tenant>": {"<agent>" | "*": {"provider": "...", "model"?: "...",
   * "options"?: {"temperature": 0.2, ...}}}}. An agent's own entry wins over the tenant's "*". Applied at
   * intake, pinned in the run; a request naming another provider for such a run is a 400. Each
   * provider named must be enabled on every process (checked at boot, the field named).
   */
  TENANT_MODELS: json(
    z.record(
      tenantNameSchema(),
      z.record(
        z.union([z.literal('*'), z.string().regex(AGENT_NAME_FORMAT, 'an agent name or *')]),
        agentModelChoiceSchema,
      ),
    ),
    {},
  ),
  /**
   * The scripted provider (and run-supplied scripts) is for demos and tests: development only; `false` disables it
   * there too.
   */
  SCRIPTED_MODEL_ENABLED: bool.optional(),
  /**
   * Per provider, the deployment keeps only the endpoint, the credential and a default model id (for
   * choices that name none); agents and tenants choose the model. OpenAI and Anthropic exist only with
   * their key; an OpenAI-compatible server only with its URL (src/server/buildContext.ts buildProviders).
   */
  OPENAI_BASE_URL: z.url().default('https://api.openai.com/v1'),
  /** OpenAI API key: the openai provider exists only with it. */
  OPENAI_API_KEY: z.string().optional(),
  /** Default model id of the openai provider. */
  OPENAI_MODEL: z.string().default('gpt-4o-mini'),
  /** Anthropic Messages API (https://api.anthropic.com/v1 by default). */
  ANTHROPIC_BASE_URL: z.url().default('https://api.anthropic.com/v1'),
  /** Anthropic API key: the anthropic provider exists only with it. */
  ANTHROPIC_API_KEY: z.string().optional(),
  /** Default model id of the anthropic provider. */
  ANTHROPIC_MODEL: z.string().default('claude-sonnet-4-5'),
  /**
   * An OpenAI-compatible Chat Completions server (vLLM `http://host:8000/v1`, Ollama `http://host:11434/v1`); unset =
   * no such provider.
   */
  OPENAI_COMPATIBLE_BASE_URL: z.url().optional(),
  /** Default model id of the openai-compatible server (required with its URL). */
  OPENAI_COMPATIBLE_MODEL: z.string().optional(),
  /** Sent as a bearer token when set (vLLM --api-key); Ollama needs none. */
  OPENAI_COMPATIBLE_API_KEY: z.string().optional(),
  /** One model attempt's timeout (never past the run's deadline). */
  MODEL_TIMEOUT_MS: int(30000, 1),
  /**
   * Stream model answers to the run's event stream (`text_delta` events, `step_restarted` when a step
   * that streamed is delivered again). Off by default: it puts model text (customer-facing) into the
   * event stream, adds a fenced Redis write per batch, and makes a provider's final usage chunk
   * mandatory for every attempt (a stream without it fails the attempt).
   */
  MODEL_STREAMING: bool.default(false),
  /** A batch of streamed text is written this long after its first character at the latest... */
  MODEL_STREAM_FLUSH_MS: int(250, 1),
  /** ...or as soon as it holds this many characters. */
  MODEL_STREAM_FLUSH_CHARS: int(1024, 1),
  /**
   * Attempts of one model call inside one delivery (short backoffs, no Retry-After); past them the step job is delayed.
   */
  MODEL_MAX_ATTEMPTS: int(4, 1),
  /**
   * A provider outage (429/5xx/network, Retry-After honoured by delaying the step job) is waited out this long
   * from its first failure; a wait that would end past it parks the run needs_human / provider_unavailable.
   */
  MODEL_OUTAGE_MAX_MS: int(10 * 60_000, 0),
  /** First backoff of a retry in code (capped exponential, full jitter). */
  RETRY_BASE_MS: int(200, 0),
  /** Largest backoff of a retry in code; also the delay of an outage wait that names no Retry-After. */
  RETRY_MAX_MS: int(5000, 0),
  /** Completion cap sent to the model and used by the pre-flight budget estimate. */
  COMPLETION_TOKEN_CAP: int(1024, 1),
  /** Steps of a run whose request gives none. */
  DEFAULT_MAX_STEPS: int(20, 1).pipe(z.number().max(HARD_LIMITS.maxSteps)),
  /** Tokens of a run whose request gives none. */
  DEFAULT_MAX_TOKENS: int(100000, 1).pipe(z.number().max(HARD_LIMITS.maxTokens)),
  /** Wall clock of a run whose request gives none. */
  DEFAULT_MAX_WALL_MS: int(15 * 60_000, 1).pipe(z.number().max(HARD_LIMITS.maxWallMs)),
  /** Ceilings a request may not exceed (a 400 names the field); at most the hard limits of src/core/limits.ts. */
  LIMIT_MAX_STEPS: int(200, 1).pipe(z.number().max(HARD_LIMITS.maxSteps)),
  /** The most tokens a request may ask for (a 400 names the field); at most the hard limit. */
  LIMIT_MAX_TOKENS: int(5_000_000, 1).pipe(z.number().max(HARD_LIMITS.maxTokens)),
  /** The longest wall clock a request may ask for (a 400 names the field); at most the hard limit. */
  LIMIT_MAX_WALL_MS: int(24 * 3600_000, 1).pipe(z.number().max(HARD_LIMITS.maxWallMs)),
  /**
   * A run's money budget when its request gives none, in µ$ (1e-6 USD; 0 = none, or LIMIT_MAX_COST when that is
   * set). Priced by MODEL_PRICES (docs/budgets.md).
   */
  DEFAULT_MAX_COST: int(0, 0).pipe(z.number().max(HARD_LIMITS.maxCost)),
  /** The most µ$ a request may ask for (a 400 names budget.maxCost; 0 = no ceiling); at most the hard limit. */
  LIMIT_MAX_COST: int(0, 0).pipe(z.number().max(HARD_LIMITS.maxCost)),
  /** Same write requested this many extra times in one run stops it as needs_human/loop_detected. */
  LOOP_REPEAT_LIMIT: int(2, 1),
  /** Keys of finished runs expire after this long. */
  RUN_RETENTION_MS: int(7 * 24 * 3600_000, 1000),
  /**
   * How often the reconciler's compactor shrinks the runs that ended since (their journal, events and spec packed, the
   * actions' histories folded; every reader sees the same run). A run is queued for it by the change that ends it.
   */
  COMPACT_INTERVAL_MS: int(200, 10),
  /** Ended runs a compactor claims per shard per pass (a pass that claimed this many passes again at once). */
  COMPACT_BATCH: int(200, 1),
  /** A compactor's claim on the runs it took: a compactor that dies holding it leaves them to the next after this. */
  COMPACT_LEASE_MS: int(60_000, 100),
  /**
   * The archive: a PostgreSQL URL (`postgres://user:pass@host:5432/db`). With it, every run that ends is copied there
   * (journal, effects with their history, events, budget, links) by the reconciler process, and its Redis keys get
   * RUN_RETENTION_MS only once its archive row is committed; GET /v1/runs/:id reads the archive when Redis no longer
   * has the run. Unset: no archive, a run's record ends at RUN_RETENTION_MS (production boots log a warning).
   */
  ARCHIVE_URL: z.url().optional(),
  /** Archived runs older than this (by their end) are deleted from the archive by a periodic sweep; 0 keeps them. */
  ARCHIVE_RETENTION_DAYS: int(365, 0),
  /** How often the archiver looks for ended runs not yet archived. */
  ARCHIVE_INTERVAL_MS: int(1000, 10),
  /** Runs archived per shard per pass. */
  ARCHIVE_BATCH: int(100, 1),
  /**
   * A run's archive lease: one archiver copies a run at a time (an efficiency guard: the archive's insert is
   * idempotent by run id); a killed archiver's runs are taken again after it.
   */
  ARCHIVE_LEASE_MS: int(30_000, 100),
  /**
   * Follow-ups: how long a subject's latest-run record lives after its last run was created. A later
   * event on the subject within it starts a run linked to that one (`previousRunId`); past it, an unlinked run.
   */
  SUBJECT_LINK_TTL_MS: int(30 * 24 * 3600_000, 1000),
  /**
   * A follow-up whose previous run is still queued or running waits before its first model call
   * (its step job is delayed this long, again and again, within its own wall-clock budget).
   */
  FOLLOW_UP_WAIT_MS: int(1000, 10),
  /**
   * An event delivered on a key no run waits on yet (POST /v1/events) is kept this long for a wait to come;
   * a wait's record is kept this long past its due time.
   */
  EVENT_KEEP_MS: int(24 * 3600_000, 1000),
  /**
   * The largest event payload POST /v1/events takes, in bytes of its JSON (413 `payload_too_large` past it, nothing
   * written). Webhook deliveries are bounded by the webhook body limit and never kept.
   */
  EVENT_PAYLOAD_MAX_BYTES: int(64 * 1024, 1),
  /**
   * A tenant's deliveries kept at a time on keys no run waits on (POST /v1/events): one more is refused 429
   * `kept_deliveries_limit` naming this setting, nothing written. A kept delivery counts until its keep ends.
   */
  EVENT_KEPT_MAX_PER_TENANT: int(1000, 1),
  /** The payload bytes of a tenant's kept deliveries at a time (429 `kept_deliveries_limit` past it, as above). */
  EVENT_KEPT_MAX_BYTES_PER_TENANT: int(16 * 1024 * 1024, 1),
  /**
   * How long a delivery's `eventId` (POST /v1/events) is remembered on its key: the same id again within it is
   * answered as the first time (`duplicate: true`) and delivers nothing.
   */
  EVENT_ID_TTL_MS: int(24 * 3600_000, 1000),
  /**
   * Schedules one tenant may hold, paused ones included (PUT /v1/schedules/:id of a new one past it: 409
   * `schedule_limit` naming `tenant`, nothing written; replacing one of its own is always allowed).
   */
  SCHEDULES_MAX_PER_TENANT: int(20, 1),
  /**
   * The shortest time between two ticks a schedule's cron may ask for, in ms (a pattern whose ticks can come closer,
   * e.g. every second, is a 400 naming `cron`, nothing written). Checked from the pattern's seconds, minutes and hours,
   * midnight included.
   */
  SCHEDULE_MIN_INTERVAL_MS: int(60_000, 1000),
  /**
   * Events stream cap per run, in stream entries (approximate MAXLEN), not events: a script that appends several
   * events stores them in one entry (a step's commit up to four), so the stream keeps more events than this. A step
   * that stays running checks it on every eighth step, so a stream may pass it by a few entries until then.
   */
  EVENTS_MAX_LEN: int(1000, 10),
  /** Reconciliation: how long a still-processing request is queried before going to a human. */
  RECONCILE_DEADLINE_MS: int(30000, 0),
  /** How often a still-processing request is queried while it is reconciled. */
  RECONCILE_POLL_MS: int(500, 1),
  /**
   * The least time one attempt to settle a doubt (a lookup, a same-key replay) is given, in ms, or the tool's own
   * timeout when that is shorter, even when less is left before RECONCILE_DEADLINE_MS or the run's deadline plus
   * DEADLINE_MARGIN_MS: the last answer before a person decides is the service's, never a timeout of the few ms the
   * deadline left. A dispatch started before the run's deadline gets the same. Those deadlines are overrun by at
   * most this much.
   */
  RECONCILE_MIN_ATTEMPT_MS: int(2000, 1),
  /**
   * How far past the run's wall-clock deadline a step may still wait: only for the lookups that settle a
   * write cut off by the deadline (then a person decides). Model calls, reads, backoffs and dispatches end at the
   * deadline.
   */
  DEADLINE_MARGIN_MS: int(1000, 0),
  /** The reconciler's sweep period. */
  RECONCILER_SWEEP_MS: int(2000, 50),
  /** An action in dispatched/outcome_unknown older than this, with no live owner, is swept. */
  RECONCILER_MIN_AGE_MS: int(5000, 0),
  /**
   * A queued/running run whose current step job is failed, missing or completed without a commit, untouched this long,
   * is ended by the sweep.
   */
  STUCK_RUN_MIN_AGE_MS: int(30000, 0),
  /** Run-index entries per shard the sweep checks for stuck runs on each pass (it resumes where it stopped). */
  STUCK_RUN_SCAN_PER_SWEEP: int(5000, 1),
  /** pino level. */
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** OpenTelemetry spans per step, model call and effect: off, console, or otlp (OTLP/HTTP). */
  TRACING: z.enum(['off', 'console', 'otlp']).default('off'),
  /** OTLP/HTTP endpoint of TRACING=otlp (default http://localhost:4318/v1/traces). */
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.url().optional(),
  /** Test-only: named crash points that SIGKILL this process when reached. */
  CRASH_POINTS: csv,
  /**
   * Test-only: `point@step=ms` blocks the event loop that long at a named point (a false stall:
   * no lock renewal, so another worker takes the step while this one still runs); `point@step=stop` stops the
   * process there (SIGSTOP) until the test sends it SIGCONT.
   */
  PAUSE_POINTS: csv,
  /** Test-only: disables the ledger's idempotency (negative control of the chaos campaign). */
  UNSAFE_DISABLE_IDEMPOTENCY: bool.default(false),
  /**
   * Run routes (POST /v1/runs, run views, events) need PRODUCER_TOKEN, OPERATOR_TOKEN or a
   * TENANT_TOKENS entry; operator routes need OPERATOR_TOKEN (Bull Board and run pages also take
   * BULL_BOARD_USER/PASSWORD). A route whose credential is not configured answers 503 naming it.
   * Production refuses any of these credentials (and METRICS_TOKEN, TENANT_TOKENS, WEBHOOK_SECRETS,
   * CONSOLE_SESSION_SECRET) shorter than 16 characters.
   */
  PRODUCER_TOKEN: z.string().optional(),
  /** Bearer token of the operator routes and the console (or OPERATORS / OIDC_ISSUER). */
  OPERATOR_TOKEN: z.string().optional(),
  /**
   * Development only: `generate` fills every unset PRODUCER_TOKEN, OPERATOR_TOKEN,
   * BULL_BOARD_USER/PASSWORD with random values at boot (`npm start` prints them). Refused in production.
   */
  DEV_AUTH: z.enum(['off', 'generate']).default('off'),
  /**
   * Per-operator credentials (src/http/operatorIdentity.ts), JSON:
   * [{"name":"ada","tokenSha256":"<hex sha256 of the token>","role":"operator"|"viewer","tenants":"*"|["acme"]}].
   * OPERATORS_FILE names a file holding the same JSON (read once at boot); both may be set.
   * OPERATOR_TOKEN stays one operator named `operator`, role operator, every tenant. "*" alone is every tenant; a
   * list holds tenant names only ("*" in a list is refused: src/core/tenant.ts).
   */
  OPERATORS: json(z.array(operatorEntrySchema), []),
  /** A file holding OPERATORS (a mounted secret); read at boot. */
  OPERATORS_FILE: z.string().optional(),
  /**
   * OIDC/JWT bearer tokens, verified with `jose`: issuer and audience must match, the signature
   * checks against OIDC_JWKS_URL (the issuer's key set, fetched and cached) or OIDC_PUBLIC_KEY (a
   * PEM SPKI key). The operator's name, role (operator | viewer) and tenants ("*" or a list) come
   * from the claims named here. Unset OIDC_ISSUER = JWTs are not accepted.
   */
  OIDC_ISSUER: z.string().min(1).optional(),
  /** The audience an operator JWT must name. */
  OIDC_AUDIENCE: z.string().min(1).optional(),
  /** The issuer's JWKS URL (or OIDC_PUBLIC_KEY). */
  OIDC_JWKS_URL: z.url().optional(),
  /** The issuer's public key, PEM (instead of OIDC_JWKS_URL). */
  OIDC_PUBLIC_KEY: z.string().min(1).optional(),
  /** Signature algorithms an operator JWT may use, comma-separated. */
  OIDC_ALGORITHMS: z
    .string()
    .default('RS256,ES256,EdDSA')
    .transform((s) =>
      s
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean),
    ),
  /** The JWT claim naming the operator. */
  OIDC_NAME_CLAIM: z.string().default('email'),
  /** The JWT claim holding the operator's role (viewer or operator). */
  OIDC_ROLE_CLAIM: z.string().default('role'),
  /**
   * The JWT claim listing the operator's tenants: "*" alone is every tenant; a list holding anything but tenant names
   * ("*" among them) is refused (401, `claim_invalid`).
   */
  OIDC_TENANTS_CLAIM: z.string().default('tenants'),
  /**
   * Signs the console's session cookie (HMAC-SHA256). Unset in development: a random secret per
   * process (sessions end with it). Production refuses the console login without it.
   */
  CONSOLE_SESSION_SECRET: z.string().min(16).optional(),
  /** How long a console session lasts after login (a JWT login: never past the token's exp). */
  CONSOLE_SESSION_TTL_MS: int(8 * 3600_000, 60_000),
  /** {"tenant": "token"}: a tenant token may create and read only that tenant's runs. Each key a tenant's name. */
  TENANT_TOKENS: json(z.record(tenantNameSchema(), z.string().min(8)), {}),
  /**
   * {"tenant": "secret"}: HMAC-SHA256 secrets of the signed webhooks (each agent's intake.webhooks). Each key a
   * tenant's name.
   */
  WEBHOOK_SECRETS: json(z.record(tenantNameSchema(), z.string().min(8)), {}),
  /** Replay window of signed webhooks (timestamp tolerance). */
  WEBHOOK_TOLERANCE_S: int(300, 1),
  /**
   * Which write actions need a person's approval, e.g.
   * [{"tool":"refund","minAmountCents":5000},{"tenant":"acme","tool":"send_email"}].
   */
  APPROVAL_RULES: json(
    z.array(
      z
        .object({
          tenant: z.string().optional(),
          tool: z.string(),
          minAmountCents: z.number().int().nonnegative().optional(),
        })
        .strict(),
    ),
    [],
  ),
  /** A pending approval expires after this long; the run then stops with reason approval_expired. */
  APPROVAL_TTL_MS: int(24 * 3600_000, 1000),
  /** Bull Board basic auth (the operator token is accepted too). Production requires one of them. */
  BULL_BOARD_USER: z.string().optional(),
  /** Bull Board's basic-auth password (with BULL_BOARD_USER). */
  BULL_BOARD_PASSWORD: z.string().optional(),
  /** Bull Board without retry and remove buttons. */
  BULL_BOARD_READ_ONLY: bool.default(true),
  /**
   * Bearer token /metrics requires on every process (API, worker, reconciler). Production serves no /metrics without
   * it (503 naming it); unset in development = no token.
   */
  METRICS_TOKEN: z.string().min(8).optional(),
  /**
   * The API serves /metrics on this separate port instead of PORT (0 = on PORT). It needs METRICS_TOKEN in
   * production there too, as every /metrics does (it names tenants and volumes).
   */
  API_METRICS_PORT: int(0, 0),
  /** Live event streams (SSE) one API process serves at once; past it a viewer gets 503. */
  SSE_MAX_VIEWERS: int(1000, 1),
  /**
   * Live event streams one principal (a tenant token, the producer token, one operator) holds at once in one API
   * process; past it that principal gets 503 naming this setting, and everyone else is still served.
   */
  SSE_MAX_VIEWERS_PER_PRINCIPAL: int(100, 1),
  /**
   * Of SSE_MAX_VIEWERS, the streams only operators may take (the console's live updates): tenants and the producer
   * share the rest. Must be below SSE_MAX_VIEWERS.
   */
  SSE_OPERATOR_RESERVE: int(100, 0),
  /** Per-tenant token budget per UTC day (0 = no tenant budget). */
  TENANT_DAILY_TOKENS: int(0, 0),
  /** Per-tenant spend per UTC day, in µ$ (0 = none): each model attempt's cost estimate is reserved against it. */
  TENANT_DAILY_COST: int(0, 0),
  /** Per-tenant spend per UTC calendar month, in µ$ (0 = none). */
  TENANT_MONTHLY_COST: int(0, 0),
  /** Per-agent spend per UTC day across tenants, in µ$ (0 = none). */
  AGENT_DAILY_COST: int(0, 0),
  /** The whole fleet's spend per UTC calendar month, in µ$ (0 = none). */
  FLEET_MONTHLY_COST: int(0, 0),
  /**
   * How long a worker keeps model attempts' spend in memory before it sends it to the tenant, agent and fleet
   * counters and the spend reports, in one batch (sooner at a graceful stop, or before a money limit refuses it),
   * with what its money leases hold undrawn. Meanwhile an attempt's reservation stays on the limited counters. A SIGKILLed worker's unsent attempts keep
   * their reservations there and are missing from the reports; their runs' own cost has them.
   */
  SPEND_FLUSH_MS: int(1000, 10),
  /**
   * With a money limit in force: the least number of model attempts' cost estimates a worker leases at once on the
   * limited counters (one script), drawing each attempt's estimate from the lease in memory; more when it drew more
   * since its last batch or in the one before, at most an eighth of the room left under the limit (so near it a
   * lease is one estimate). What it has not drawn goes back within SPEND_FLUSH_MS. A SIGKILLed worker's undrawn rest
   * stays counted against the limit until the counter's UTC day or month ends (over, never under). 1 with a worker
   * that draws little: about a reservation per attempt.
   */
  SPEND_LEASE_ATTEMPTS: int(16, 1),
  /**
   * Model prices over the shipped defaults (src/core/prices.ts), in µ$ per million tokens, e.g.
   * [{"provider":"openai","model":"gpt-4o-mini","from":"2027-01-01T00:00:00Z","input":150000,"output":600000,
   * "cachedInput":75000}]: an entry with `from` applies to attempts from that time on (earlier charges keep their
   * price); `model` omitted prices every model of the provider; `cacheWrite` where the provider bills it.
   */
  MODEL_PRICES: json(z.array(priceEntrySchema), []),
  /**
   * Flow control (src/flow): a new run waits in its tenant's line and is admitted in weighted
   * round-robin while its tenant, its agent and the fleet are under their concurrency limits.
   * On by default: one tenant's burst cannot starve the others. FLOW_CONTROL=false turns it off: every run starts at
   * once (first come, first served, step by step).
   */
  FLOW_CONTROL: bool.default(true),
  /**
   * Runs of one tenant at work at once (0 = no limit); per tenant in FLOW_TENANT_LIMITS, at run time by `agentctl
   * flow`.
   */
  FLOW_TENANT_CONCURRENCY: int(50, 0),
  /**
   * Runs one tenant may have waiting in its line (0 = no limit); per tenant in FLOW_TENANT_WAITING_LIMITS, at run time
   * by `agentctl flow tenant <t> --max-waiting`. A new run past it is refused, nothing written: 429
   * `tenant_line_full` with Retry-After (a schedule's tick fails and is retried). Bounds one producer's burst, which
   * would otherwise fill Redis for every tenant (at about 3 KB a waiting run, the default holds some 30 MB a tenant).
   * A child run is never refused: its parent is at work and waits for it.
   */
  FLOW_TENANT_MAX_WAITING: int(10_000, 0),
  /** Runs of one agent at work at once, across tenants (0 = no limit); per agent in FLOW_AGENT_LIMITS. */
  FLOW_AGENT_CONCURRENCY: int(0, 0),
  /** Runs at work at once in the whole fleet (0 = no limit). */
  FLOW_FLEET_CONCURRENCY: int(0, 0),
  /**
   * Weights of the tenants' turns, e.g. {"acme":2} (default 1 each): a tenant of weight 2 is admitted twice as often.
   * From 0.001 to 1000 (src/core/flowWeight.ts). Each key a tenant's name.
   */
  FLOW_TENANT_WEIGHTS: json(z.record(tenantNameSchema(), z.number().min(FLOW_WEIGHT_MIN).max(FLOW_WEIGHT_MAX)), {}),
  /** Concurrency limits per tenant, e.g. {"acme":100} (0 = none), over FLOW_TENANT_CONCURRENCY. Each key a tenant's name. */
  FLOW_TENANT_LIMITS: json(z.record(tenantNameSchema(), z.number().int().min(0)), {}),
  /**
   * Waiting limits per tenant, e.g. {"acme":50000} (0 = none), over FLOW_TENANT_MAX_WAITING. Each key a tenant's name.
   */
  FLOW_TENANT_WAITING_LIMITS: json(z.record(tenantNameSchema(), z.number().int().min(0)), {}),
  /** Concurrency limits per agent, e.g. {"support":40} (0 = none), over FLOW_AGENT_CONCURRENCY. */
  FLOW_AGENT_LIMITS: json(
    z.record(
      z.string().regex(AGENT_NAME_FORMAT, 'an agent name: a-z, then up to 62 of a-z, 0-9, _ or -'),
      z.number().int().min(0),
    ),
    {},
  ),
  /** How often each worker does flow control's bookkeeping: slots of ended runs, admissions whose admitter died. */
  FLOW_SWEEP_MS: int(1000, 50),
  /**
   * How often flow control's state is checked against the runs' own (one worker a period): a write lost in a failover
   * must not leave a run waiting for ever or a slot counted for nobody (src/flow/repair.ts). Also the age a run's flow
   * state must have before it is repaired (younger, its admission may still be under way).
   */
  FLOW_REPAIR_MS: int(5000, 100),
  /**
   * Under flow control, order admitted runs' step jobs by their tenant's share (a tenant with fewer runs at work per
   * unit of weight first); false: one first-come-first-served line, as with flow control off.
   */
  FLOW_STEP_PRIORITY: bool.default(true),
  /**
   * Model rate limits, e.g. [{"provider":"openai","model":"gpt-4o-mini","rpm":500,"tpm":200000}]: a token
   * bucket each, reserved before every model attempt. `model` omitted: every model of the provider shares
   * it; `perTenant`: one bucket per tenant with these limits.
   */
  MODEL_RATE_LIMITS: json(
    z.array(
      z
        .object({
          provider: z.string().min(1),
          model: z.string().min(1).optional(),
          rpm: z.number().int().min(0),
          tpm: z.number().int().min(0),
          perTenant: z.boolean().optional(),
        })
        .strict(),
    ),
    [],
  ),
  /** How much refill a rate-limit bucket holds (ms of its rate): the largest burst past the steady rate. */
  MODEL_RATE_BURST_MS: int(1000, 10),
});

export type Config = Readonly<z.infer<typeof configSchema>>;

/**
 * SHARDS on a Cluster when unset: the tags {0}..{15} fall on every master of a 3-master (6, 6, 4) and 6-master cluster.
 */
export const CLUSTER_DEFAULT_SHARDS = 16;

/** OPERATORS_FILE: the same JSON as OPERATORS; unreadable or invalid fails the boot naming the field. */
function readOperatorsFile(path: string): OperatorEntry[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(
      ['OPERATORS_FILE'],
      `invalid configuration: OPERATORS_FILE: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new ConfigError(['OPERATORS_FILE'], 'invalid configuration: OPERATORS_FILE: must be JSON');
  }
  const parsed = z.array(operatorEntrySchema).safeParse(raw);
  if (!parsed.success) {
    const detail = parsed.error.issues.map((i) => `${i.path.join('.')}: ${issueMessage(i)}`).join('; ');
    throw new ConfigError(['OPERATORS_FILE'], `invalid configuration: OPERATORS_FILE: ${detail}`);
  }
  return parsed.data;
}

/** The shortest credential production accepts (PRODUCTION_SECRET_MIN characters). */
export const PRODUCTION_SECRET_MIN = 16;

/**
 * Every credential this deployment chooses and the app checks a caller against (or signs with), by the setting that
 * names it: production holds each to PRODUCTION_SECRET_MIN characters, one rule for all of them.
 */
function chosenSecrets(cfg: z.infer<typeof configSchema>): [string, string | undefined][] {
  return [
    ['PRODUCER_TOKEN', cfg.PRODUCER_TOKEN],
    ['OPERATOR_TOKEN', cfg.OPERATOR_TOKEN],
    ['BULL_BOARD_PASSWORD', cfg.BULL_BOARD_PASSWORD],
    ['METRICS_TOKEN', cfg.METRICS_TOKEN],
    ['CONSOLE_SESSION_SECRET', cfg.CONSOLE_SESSION_SECRET],
    ...Object.entries(cfg.TENANT_TOKENS).map(([tenant, token]): [string, string] => [`TENANT_TOKENS.${tenant}`, token]),
    ...Object.entries(cfg.WEBHOOK_SECRETS).map(([tenant, s]): [string, string] => [`WEBHOOK_SECRETS.${tenant}`, s]),
  ];
}

/** A frozen copy of an environment: empty values are unset. */
function snapshot(env: Record<string, string | undefined>): Readonly<Record<string, string>> {
  const copy: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) if (value !== undefined && value !== '') copy[name] = value;
  return Object.freeze(copy);
}

const environments = new WeakMap<Config, Readonly<Record<string, string>>>();

/**
 * The environment a configuration was read from, for the agents module's own settings
 * (src/config/agentsModule.ts hands a module the names its schema declares), so the settings
 * and the configuration always come from one place; this process's environment for a
 * configuration loadConfig did not make.
 */
export function environmentOf(cfg: Config): Readonly<Record<string, string>> {
  return environments.get(cfg) ?? snapshot(process.env);
}

/** What an issue says; a record's bad key says what a key must be (zod's own message only says that it is bad). */
function issueMessage(issue: z.core.$ZodIssue): string {
  return issue.code === 'invalid_key' && issue.issues[0] ? issue.issues[0].message : issue.message;
}

/**
 * Which process loads the configuration: the API (and a process that serves it, such as the demo's) needs the
 * producer's and the operators' credentials in production; a worker, the reconciler or the replay tool serves neither
 * and is not made to hold them.
 */
export interface LoadOptions {
  role?: 'api' | 'worker' | 'reconciler' | 'replay';
}

export function loadConfig(env: Record<string, string | undefined> = process.env, opts: LoadOptions = {}): Config {
  const raw: Record<string, string> = {};
  for (const key of Object.keys(configSchema.shape)) {
    const v = env[key];
    if (v !== undefined && v !== '') raw[key] = v;
  }
  // The convention a deployment already follows: NODE_ENV=production with no APP_MODE is production, its checks on.
  if (raw.APP_MODE === undefined && env.NODE_ENV === 'production') raw.APP_MODE = 'production';
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) {
    const fields = parsed.error.issues.map((i) => i.path.join('.'));
    const detail = parsed.error.issues.map((i) => `${i.path.join('.')}: ${issueMessage(i)}`).join('; ');
    throw new ConfigError(fields, `invalid configuration: ${detail}`);
  }
  const cfg = parsed.data;
  // One shard would put every run on one master of a Cluster: spread by default.
  if (raw.SHARDS === undefined && cfg.REDIS_CLUSTER_NODES.length > 0) cfg.SHARDS = CLUSTER_DEFAULT_SHARDS;
  if (cfg.DEV_AUTH === 'generate') {
    if (cfg.APP_MODE !== 'development')
      throw new ConfigError(['DEV_AUTH'], 'invalid configuration: DEV_AUTH=generate is for APP_MODE=development only');
    const secret = () => randomBytes(18).toString('base64url');
    cfg.PRODUCER_TOKEN ??= secret();
    cfg.OPERATOR_TOKEN ??= secret();
    if (cfg.BULL_BOARD_USER === undefined || cfg.BULL_BOARD_PASSWORD === undefined) {
      cfg.BULL_BOARD_USER = 'operator';
      cfg.BULL_BOARD_PASSWORD = secret();
    }
  }
  if (cfg.OPENAI_COMPATIBLE_BASE_URL && !cfg.OPENAI_COMPATIBLE_MODEL) {
    throw new ConfigError(
      ['OPENAI_COMPATIBLE_MODEL'],
      'invalid configuration: OPENAI_COMPATIBLE_MODEL: required with OPENAI_COMPATIBLE_BASE_URL (the model the server serves)',
    );
  }
  if (cfg.OPERATORS_FILE !== undefined) cfg.OPERATORS = [...cfg.OPERATORS, ...readOperatorsFile(cfg.OPERATORS_FILE)];
  const names = cfg.OPERATORS.map((o) => o.name);
  const dup = names.find((n, i) => names.indexOf(n) !== i || (n === 'operator' && cfg.OPERATOR_TOKEN !== undefined));
  if (dup !== undefined)
    throw new ConfigError(
      ['OPERATORS'],
      `invalid configuration: OPERATORS: operator name ${dup} is used twice (OPERATOR_TOKEN is the operator named operator)`,
    );
  if (
    cfg.OIDC_ISSUER !== undefined &&
    (cfg.OIDC_AUDIENCE === undefined || (cfg.OIDC_JWKS_URL === undefined) === (cfg.OIDC_PUBLIC_KEY === undefined))
  ) {
    throw new ConfigError(
      ['OIDC_ISSUER'],
      'invalid configuration: OIDC_ISSUER needs OIDC_AUDIENCE and exactly one of OIDC_JWKS_URL or OIDC_PUBLIC_KEY',
    );
  }
  // A heartbeat slower than its TTL would let a live worker's announcement lapse between two beats.
  if (cfg.VERSION_HEARTBEAT_MS * 2 > cfg.VERSION_TTL_MS) {
    throw new ConfigError(
      ['VERSION_TTL_MS'],
      `invalid configuration: VERSION_TTL_MS: ${cfg.VERSION_TTL_MS} must be at least twice VERSION_HEARTBEAT_MS (${cfg.VERSION_HEARTBEAT_MS})`,
    );
  }
  // A reserve as large as the whole would leave tenants no live view at all.
  if (cfg.SSE_OPERATOR_RESERVE >= cfg.SSE_MAX_VIEWERS) {
    throw new ConfigError(
      ['SSE_OPERATOR_RESERVE'],
      `invalid configuration: SSE_OPERATOR_RESERVE: ${cfg.SSE_OPERATOR_RESERVE} must be below SSE_MAX_VIEWERS (${cfg.SSE_MAX_VIEWERS})`,
    );
  }
  // A default budget above the largest one a request may ask would make every request without a budget a 400.
  for (const [def, limit] of [
    ['DEFAULT_MAX_STEPS', 'LIMIT_MAX_STEPS'],
    ['DEFAULT_MAX_TOKENS', 'LIMIT_MAX_TOKENS'],
    ['DEFAULT_MAX_WALL_MS', 'LIMIT_MAX_WALL_MS'],
  ] as const) {
    if (cfg[def] > cfg[limit])
      throw new ConfigError([def], `invalid configuration: ${def}: ${cfg[def]} is above ${limit} (${cfg[limit]})`);
  }
  if (cfg.LIMIT_MAX_COST > 0 && cfg.DEFAULT_MAX_COST > cfg.LIMIT_MAX_COST)
    throw new ConfigError(
      ['DEFAULT_MAX_COST'],
      `invalid configuration: DEFAULT_MAX_COST: ${cfg.DEFAULT_MAX_COST} is above LIMIT_MAX_COST (${cfg.LIMIT_MAX_COST})`,
    );
  if (cfg.APP_MODE === 'production') {
    const refuse = (field: string, why: string) => {
      throw new ConfigError([field], `invalid configuration: ${field}: ${why} (APP_MODE=production)`);
    };
    // The scripted model plays canned turns, and a run may carry its own script: neither is a model.
    if (cfg.MODEL_PROVIDER === 'scripted')
      refuse(
        'MODEL_PROVIDER',
        'the scripted model is refused in production; use openai, anthropic or openai-compatible',
      );
    if (cfg.SCRIPTED_MODEL_ENABLED === true)
      refuse('SCRIPTED_MODEL_ENABLED', 'the scripted model and run-supplied scripts are refused in production');
    for (const [tenant, byAgent] of Object.entries(cfg.TENANT_MODELS)) {
      for (const [agent, choice] of Object.entries(byAgent)) {
        if (choice.provider === 'scripted')
          refuse(`TENANT_MODELS.${tenant}.${agent}.provider`, 'the scripted model is refused in production');
      }
    }
    if (cfg.MODEL_PROVIDER === 'openai' && !cfg.OPENAI_API_KEY)
      refuse('OPENAI_API_KEY', 'required by MODEL_PROVIDER=openai');
    if (cfg.MODEL_PROVIDER === 'anthropic' && !cfg.ANTHROPIC_API_KEY)
      refuse('ANTHROPIC_API_KEY', 'required by MODEL_PROVIDER=anthropic');
    if (cfg.MODEL_PROVIDER === 'openai-compatible' && !cfg.OPENAI_COMPATIBLE_BASE_URL)
      refuse('OPENAI_COMPATIBLE_BASE_URL', 'required by MODEL_PROVIDER=openai-compatible');
    // Operators may be per-person (OPERATORS, OIDC) instead of the one shared OPERATOR_TOKEN.
    const operatorCredential =
      cfg.OPERATOR_TOKEN !== undefined || cfg.OPERATORS.length > 0 || cfg.OIDC_ISSUER !== undefined;
    const servesApi = opts.role === undefined || opts.role === 'api';
    if (servesApi && (!cfg.PRODUCER_TOKEN || !operatorCredential)) {
      throw new ConfigError(
        ['PRODUCER_TOKEN', 'OPERATOR_TOKEN'],
        'invalid configuration: production requires PRODUCER_TOKEN and OPERATOR_TOKEN (or OPERATORS / OIDC_ISSUER)',
      );
    }
    // A short token is guessed; the message names the setting and its length rule, never the value.
    for (const [field, value] of chosenSecrets(cfg)) {
      if (value !== undefined && value.length < PRODUCTION_SECRET_MIN)
        refuse(field, `must be at least ${PRODUCTION_SECRET_MIN} characters`);
    }
    if (cfg.REDIS_CLUSTER_NODES.length === 0 && !cfg.REDIS_URL)
      refuse('REDIS_URL', 'required (or REDIS_CLUSTER_NODES)');
    // Test switches (src/config/testHooks.ts): a crash point SIGKILLs the process, the unsafe switch sends blindly.
    if (cfg.UNSAFE_DISABLE_IDEMPOTENCY) refuse('UNSAFE_DISABLE_IDEMPOTENCY', 'a test-only negative control');
    if (cfg.CRASH_POINTS.length > 0) refuse('CRASH_POINTS', 'test-only');
    if (cfg.PAUSE_POINTS.length > 0) refuse('PAUSE_POINTS', 'test-only');
  }
  const frozen = Object.freeze(cfg);
  environments.set(frozen, snapshot(env));
  return frozen;
}
