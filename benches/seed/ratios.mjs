// Prints, for the three calls, the JavaScript executor's median (bench.mjs's JSON output), the
// same run's criterion medians of the `dispatch` bench (`trail_emptied/*`, `floor/*`,
// `fresh_stores/high_risk`) and the ratios toolguard/seed and toolguard/floor.
//
// `node benches/seed/ratios.mjs SEED_JSON CRITERION_DIR`

import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const [seedFile, criterion] = process.argv.slice(2);
if (!seedFile || !criterion) {
  console.error('usage: node ratios.mjs SEED_JSON CRITERION_DIR');
  process.exit(2);
}
const seed = JSON.parse(readFileSync(seedFile, 'utf8')).ns_per_call;
const medianNs = (row) => {
  const file = join(criterion, ...row.split('/'), 'new', 'estimates.json');
  return JSON.parse(readFileSync(file, 'utf8')).median.point_estimate;
};
const us = (ns) => (ns / 1000).toFixed(2);
const out = {};
console.log('| call | seed (JS) | toolguard, trail emptied | toolguard/seed | floor | toolguard/floor |');
console.log('| --- | --- | --- | --- | --- | --- |');
for (const kind of ['low_risk', 'high_risk', 'replay']) {
  const call = medianNs(`trail_emptied/${kind}`);
  const floor = medianNs(`floor/${kind}`);
  out[kind] = {
    seed_ns: seed[kind],
    toolguard_ns: call,
    floor_ns: floor,
    toolguard_over_seed: call / seed[kind],
    toolguard_over_floor: call / floor,
  };
  console.log(
    `| ${kind} | ${us(seed[kind])} µs | ${us(call)} µs | ${(call / seed[kind]).toFixed(2)} | ${us(floor)} µs | ${(call / floor).toFixed(2)} |`,
  );
}
try {
  const fresh = medianNs('fresh_stores/high_risk');
  out.high_risk.fresh_stores_ns = fresh;
  console.log(`(transfer on fresh stores: ${us(fresh)} µs, ${(fresh / seed.high_risk).toFixed(2)} of the seed's)`);
} catch {
  // The row was not run.
}
console.log(JSON.stringify(out));
