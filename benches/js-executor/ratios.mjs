// Prints, for the three calls, the JavaScript executor's median (bench.mjs's JSON output), the
// same run's criterion medians of the `dispatch` bench (`trail_emptied/*`, `floor/*`,
// `fresh_stores/high_risk`) and the ratios toolguard/js and toolguard/floor.
//
// `node benches/js-executor/ratios.mjs JS_JSON CRITERION_DIR`

import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const [jsFile, criterion] = process.argv.slice(2);
if (!jsFile || !criterion) {
  console.error('usage: node ratios.mjs JS_JSON CRITERION_DIR');
  process.exit(2);
}
const js = JSON.parse(readFileSync(jsFile, 'utf8')).ns_per_call;
const medianNs = (row) => {
  const file = join(criterion, ...row.split('/'), 'new', 'estimates.json');
  return JSON.parse(readFileSync(file, 'utf8')).median.point_estimate;
};
const us = (ns) => (ns / 1000).toFixed(2);
const out = {};
console.log('| call | JS executor | toolguard, trail emptied | toolguard/js | floor | toolguard/floor |');
console.log('| --- | --- | --- | --- | --- | --- |');
for (const kind of ['low_risk', 'high_risk', 'replay']) {
  const call = medianNs(`trail_emptied/${kind}`);
  const floor = medianNs(`floor/${kind}`);
  out[kind] = {
    js_ns: js[kind],
    toolguard_ns: call,
    floor_ns: floor,
    toolguard_over_js: call / js[kind],
    toolguard_over_floor: call / floor,
  };
  console.log(
    `| ${kind} | ${us(js[kind])} µs | ${us(call)} µs | ${(call / js[kind]).toFixed(2)} | ${us(floor)} µs | ${(call / floor).toFixed(2)} |`,
  );
}
try {
  const fresh = medianNs('fresh_stores/high_risk');
  out.high_risk.fresh_stores_ns = fresh;
  console.log(`(transfer on fresh stores: ${us(fresh)} µs, ${(fresh / js.high_risk).toFixed(2)} of the JS executor's)`);
} catch {
  // The row was not run.
}
console.log(JSON.stringify(out));
