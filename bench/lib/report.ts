/** The human part of the output: one aligned table per section, then a targets summary. */
import type { SectionResult } from './types.js';

function table(header: string[], rows: (string | number)[][]): string {
  const cells = [header, ...rows.map((r) => r.map((c) => (typeof c === 'number' ? fmt(c) : c)))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => String(r[i] ?? '').length)));
  const line = (r: (string | number)[]) =>
    r
      .map((c, i) => {
        const s = String(c ?? '');
        return typeof c === 'number' || /^-?[\d.,]+( ?[a-zµ/x%]+)?$/i.test(s)
          ? s.padStart(widths[i]!)
          : s.padEnd(widths[i]!);
      })
      .join('  ');
  const sep = widths.map((w) => '-'.repeat(w)).join('  ');
  return [line(cells[0]!), sep, ...cells.slice(1).map(line)].join('\n');
}

function fmt(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  return Math.abs(n) >= 1000 ? Math.round(n).toLocaleString('en-US') : String(n);
}

export function printSection(r: SectionResult): void {
  console.log(`\n== ${r.title}${r.durationMs !== undefined ? `  (${(r.durationMs / 1000).toFixed(1)} s)` : ''}`);
  if (r.error) {
    console.log(`   ERROR: ${r.error}`);
    return;
  }
  if (r.metrics.length > 0) {
    console.log(
      table(
        ['metric', 'value', 'unit', 'target', 'status', 'note'],
        r.metrics.map((m) => [
          m.label,
          m.value,
          m.unit,
          m.target ?? '',
          m.met === undefined ? '' : m.met ? 'met' : 'MISSED',
          m.note ?? '',
        ]),
      ),
    );
  }
  for (const t of r.tables ?? []) {
    console.log(`\n-- ${t.title}`);
    console.log(table(t.header, t.rows));
  }
}

export function printSummary(results: SectionResult[]): {
  met: number;
  missed: number;
  missedKeys: string[];
  errors: string[];
} {
  const withTarget = results.flatMap((r) => r.metrics.filter((m) => m.met !== undefined).map((m) => ({ r, m })));
  const missed = withTarget.filter((x) => !x.m.met);
  const errors = results.filter((r) => r.error).map((r) => r.name);
  console.log(
    `\n== Targets: ${withTarget.length - missed.length} met, ${missed.length} missed${errors.length ? `; sections with errors: ${errors.join(', ')}` : ''}`,
  );
  for (const { r, m } of missed)
    console.log(`   MISSED ${r.name}: ${m.label} = ${m.value} ${m.unit} (target ${m.target})`);
  return {
    met: withTarget.length - missed.length,
    missed: missed.length,
    missedKeys: missed.map((x) => `${x.r.name}.${x.m.key}`),
    errors,
  };
}
