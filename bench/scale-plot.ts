// Line charts of the scale sweep as standalone SVG files (no plotting library: a few lines of
// text per chart), with a logarithmic x axis, for docs/scale.md.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Series {
  readonly name: string;
  readonly points: readonly (readonly [x: number, y: number])[];
}

const W = 640;
const H = 360;
const PAD = { left: 70, right: 170, top: 40, bottom: 50 };
const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b'];

const esc = (s: string): string =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** Writes `<dir>/<file>`: one line per series, x on a log10 scale, y linear from 0. */
export function writeLineChart(
  dir: string,
  file: string,
  title: string,
  xLabel: string,
  yLabel: string,
  series: readonly Series[],
): void {
  const all = series.flatMap((s) => s.points).filter(([x, y]) => x > 0 && Number.isFinite(y));
  if (all.length === 0) return;
  const lx = (x: number): number => Math.log10(x);
  const xMin = Math.floor(Math.min(...all.map(([x]) => lx(x))));
  const xMax = Math.max(xMin + 1, Math.ceil(Math.max(...all.map(([x]) => lx(x)))));
  const yMax = Math.max(...all.map(([, y]) => y)) * 1.1 || 1;
  const px = (x: number): number =>
    PAD.left + ((lx(x) - xMin) / (xMax - xMin)) * (W - PAD.left - PAD.right);
  const py = (y: number): number => H - PAD.bottom - (y / yMax) * (H - PAD.top - PAD.bottom);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14">${esc(title)}</text>`,
    `<line x1="${PAD.left}" y1="${H - PAD.bottom}" x2="${W - PAD.right}" y2="${H - PAD.bottom}" stroke="black"/>`,
    `<line x1="${PAD.left}" y1="${PAD.top}" x2="${PAD.left}" y2="${H - PAD.bottom}" stroke="black"/>`,
    `<text x="${(PAD.left + W - PAD.right) / 2}" y="${H - 12}" text-anchor="middle">${esc(xLabel)}</text>`,
    `<text x="16" y="${H / 2}" text-anchor="middle" transform="rotate(-90 16 ${H / 2})">${esc(yLabel)}</text>`,
  ];
  for (let e = xMin; e <= xMax; e++) {
    const x = px(10 ** e);
    parts.push(
      `<line x1="${x}" y1="${H - PAD.bottom}" x2="${x}" y2="${H - PAD.bottom + 5}" stroke="black"/>`,
      `<text x="${x}" y="${H - PAD.bottom + 18}" text-anchor="middle">${(10 ** e).toLocaleString('en-US')}</text>`,
    );
  }
  for (let i = 0; i <= 4; i++) {
    const v = (yMax / 4) * i;
    const y = py(v);
    parts.push(
      `<line x1="${PAD.left - 5}" y1="${y}" x2="${W - PAD.right}" y2="${y}" stroke="#ddd"/>`,
      `<text x="${PAD.left - 8}" y="${y + 4}" text-anchor="end">${v < 10 ? v.toFixed(1) : Math.round(v).toLocaleString('en-US')}</text>`,
    );
  }
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!;
    const pts = s.points.filter(([x, y]) => x > 0 && Number.isFinite(y));
    if (pts.length === 0) return;
    parts.push(
      `<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(' ')}"/>`,
      ...pts.map(
        ([x, y]) =>
          `<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3" fill="${color}"/>`,
      ),
      `<rect x="${W - PAD.right + 12}" y="${PAD.top + i * 20 - 9}" width="12" height="3" fill="${color}"/>`,
      `<text x="${W - PAD.right + 30}" y="${PAD.top + i * 20 - 4}">${esc(s.name)}</text>`,
    );
  });
  parts.push('</svg>\n');
  writeFileSync(join(dir, file), parts.join('\n'));
}
