// ESLint (typescript-eslint, type-checked) over every TypeScript file of the repository; formatting is
// Prettier's alone (eslint-config-prettier turns off the rules that would disagree with it).
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', '**/*.js', '**/*.cjs', '**/*.mjs', 'vitest*.config.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
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
    },
  },
  prettier,
);
