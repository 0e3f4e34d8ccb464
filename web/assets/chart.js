// A small timeline of recent runs as inline SVG: one bar per attempt, oldest left, height by
// duration (square-root scale so short runs stay visible), colour by outcome.
import { formatDuration, formatInstant, h, parseInstant, runDuration, s } from './ui.js';

const WIDTH = 720;
const HEIGHT = 110;
const PAD = { top: 4, right: 8, bottom: 1, left: 8 };

export function timeline(runs, { max = 40 } = {}) {
  const list = runs.slice(0, max).reverse(); // newest first in, oldest first drawn
  if (!list.length) {
    return h('p', { class: 'muted chart-empty' }, 'The timeline appears after the first run.');
  }
  const now = Date.now();
  const durations = list.map((r) => runDuration(r, now) ?? 0);
  const longest = Math.max(...durations, 1);
  const innerW = WIDTH - PAD.left - PAD.right;
  const innerH = HEIGHT - PAD.top - PAD.bottom;
  const slot = innerW / Math.max(list.length, 12);
  const barW = Math.max(4, Math.min(28, slot * 0.7));
  const bars = list.map((run, i) => {
    const d = durations[i];
    const height = Math.max(3, Math.sqrt(d / longest) * innerH);
    const x = PAD.left + i * slot + (slot - barW) / 2;
    const y = PAD.top + innerH - height;
    const label = `${run.run_id} · attempt ${run.attempt} · ${run.outcome.replace('_', ' ')} · `
      + `${formatDuration(runDuration(run, now))} · ${formatInstant(run.scheduled_at)}`;
    return s('rect', {
      x: x.toFixed(1), y: y.toFixed(1), width: barW.toFixed(1), height: height.toFixed(1),
      class: `bar outcome-${run.outcome}`,
    }, s('title', {}, label));
  });
  const first = list[0];
  const last = list[list.length - 1];
  const stamp = (run) => {
    const t = parseInstant(run.scheduled_at);
    return t === null ? '' : new Date(t).toLocaleString('en-GB', {
      month: 'short', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
      hourCycle: 'h23',
    });
  };
  const counts = {};
  for (const r of list) counts[r.outcome] = (counts[r.outcome] || 0) + 1;
  const summary = Object.entries(counts).map(([k, n]) => `${n} ${k.replace('_', ' ')}`).join(', ');
  // Labels are HTML around the drawing, so they keep their size whatever the width: the SVG
  // itself stretches (preserveAspectRatio none) and holds only bars and rules.
  return h('figure', { class: 'chart' },
    h('div', { class: 'chart-top' },
      h('span', {}, `Last ${list.length} runs`), h('span', {}, `longest ${formatDuration(longest)}`)),
    s('svg', {
      viewBox: `0 0 ${WIDTH} ${HEIGHT}`, preserveAspectRatio: 'none', role: 'img', class: 'timeline',
      'aria-label': `Timeline of the last ${list.length} runs: ${summary}`,
    },
    s('line', {
      x1: 0, x2: WIDTH, y1: PAD.top + innerH, y2: PAD.top + innerH, class: 'axis',
      'vector-effect': 'non-scaling-stroke',
    }),
    s('line', {
      x1: 0, x2: WIDTH, y1: PAD.top, y2: PAD.top, class: 'grid', 'vector-effect': 'non-scaling-stroke',
    }),
    ...bars),
    h('div', { class: 'chart-axis' }, h('span', {}, stamp(first)),
      list.length > 1 ? h('span', {}, stamp(last)) : null),
    h('figcaption', { class: 'legend' },
      Object.entries(counts).map(([k, n]) => h('span', { class: 'legend-item' },
        h('span', { class: `swatch outcome-${k}`, 'aria-hidden': 'true' }), `${k.replace('_', ' ')} ${n}`))));
}
