// ESLint (typescript-eslint, type-checked) over every TypeScript file of the repository; formatting is
// Prettier's alone (eslint-config-prettier turns off the rules that would disagree with it).
import js from '@eslint/js';
import globals from 'globals';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      'coverage/**',
      '**/*.js',
      '!src/http/console/static/*.js',
      '**/*.cjs',
      '**/*.mjs',
      'vitest*.config.ts',
    ],
  },
  {
    // The console's one script runs in the browser as written (no build step): ES5 in an IIFE, browser globals,
    // htmx loaded before it.
    files: ['src/http/console/static/*.js'],
    ...js.configs.recommended,
    languageOptions: { ecmaVersion: 5, sourceType: 'script', globals: { ...globals.browser, htmx: 'readonly' } },
    rules: { ...js.configs.recommended.rules, 'no-var': 'off', strict: ['error', 'function'] },
  },
  ...[js.configs.recommended, ...tseslint.configs.strictTypeChecked].map((c) => ({ ...c, files: ['**/*.ts'] })),
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'no-duplicate-imports': 'error',
      // Numbers and booleans read plainly in messages, keys and log lines; objects, nullish and unknown still do not.
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true }],
      // `() => setFlag()` and `() => void promise` are how handlers and timers are written; a void value used in an
      // expression elsewhere is still an error.
      '@typescript-eslint/no-confusing-void-expression': [
        'error',
        { ignoreArrowShorthand: true, ignoreVoidOperator: true, ignoreVoidReturningFunctions: true },
      ],
      // `return void reply(res, ...)` is a handler's early exit, the void saying nothing is returned (as the rule above
      // asks); this rule would call that same void meaningless.
      '@typescript-eslint/no-meaningless-void-operator': 'off',
      // With noUncheckedIndexedAccess every indexed read is optional; `!` marks the reads a check just above proved
      // (a length, a `has`, a regex group that matched), where a second test would be dead code.
      '@typescript-eslint/no-non-null-assertion': 'off',
      // TypeScript keeps a narrowing across an await or a callback as if nothing could change it (a `stopped` flag
      // another handler sets), and types what arrives from Redis, HTTP and JSON.stringify by what it should be: the
      // rule calls the guards on those values dead code. They are kept on purpose.
      '@typescript-eslint/no-unnecessary-condition': 'off',
      // Script replies and stored fields are typed by the shape the call declares, not by what the wire carried;
      // Number() and String() on them stay, so a reply of another type cannot flow on unconverted.
      '@typescript-eslint/no-unnecessary-type-conversion': 'off',
      // An unused argument named with a leading underscore is a signature kept on purpose.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
      // Ports (tools, providers, stores) return promises; an async implementation without an await is how a
      // synchronous throw becomes a rejection the caller's catch sees, so it is kept on purpose.
      '@typescript-eslint/require-await': 'off',
      // Lua scripts answer plain numbers, which the typed calls compare with the ScriptCode enum by design.
      '@typescript-eslint/no-unsafe-enum-comparison': 'off',
      // Agent and tool definitions are plain objects whose functions never read `this`: the engine passes them on.
      '@typescript-eslint/unbound-method': 'off',
    },
  },
  {
    // Tests, benchmarks and the demo read untyped JSON from HTTP answers and Redis on purpose, and their
    // scaffolding (a failing round thrown from `finally`, polling loops) is not code a run depends on.
    files: ['test/**/*.ts', 'bench/**/*.ts', 'demo/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-base-to-string': 'off',
      '@typescript-eslint/no-misused-promises': 'off',
      '@typescript-eslint/prefer-promise-reject-errors': 'off',
      '@typescript-eslint/restrict-template-expressions': 'off',
      'no-useless-assignment': 'off',
      'no-unsafe-finally': 'off',
      'preserve-caught-error': 'off',
      'no-control-regex': 'off',
      // A test reads the fields of the error it provoked, and builds stand-ins of library objects (a job, an error)
      // and generic helpers over untyped answers; a fuzzer deletes request fields by name.
      '@typescript-eslint/use-unknown-in-catch-callback-variable': 'off',
      '@typescript-eslint/no-unsafe-class-instance-assignment': 'off',
      '@typescript-eslint/no-unnecessary-type-parameters': 'off',
      '@typescript-eslint/no-dynamic-delete': 'off',
    },
  },
  prettier,
);
