import { Tiktoken } from 'js-tiktoken/lite';
import o200k from 'js-tiktoken/ranks/o200k_base';
import cl100k from 'js-tiktoken/ranks/cl100k_base';
import { SAMPLES } from './samples.js';
import { estimateTokens } from '../../runner/compaction/estimate.js';
const o = new Tiktoken(o200k), c = new Tiktoken(cl100k);
for (const [k, s] of Object.entries(SAMPLES)) { const e = estimateTokens(s), a = o.encode(s).length, b = c.encode(s).length; console.log(k.padEnd(10), String(a).padStart(5), String(b).padStart(5), String(e).padStart(5), ((e/a-1)*100).toFixed(1).padStart(7)+'%', ((e/b-1)*100).toFixed(1).padStart(7)+'%'); }
