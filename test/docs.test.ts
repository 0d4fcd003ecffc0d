/**
 * The user documentation stays navigable: every relative link in README.md and
 * docs/*.md points to a file that exists and, when it names an anchor, to a
 * heading that exists there (slugged as GitHub does); README.md stays short.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** README.md's budget: a user guide of about 300 lines, not a reference. */
const README_MAX_LINES = 320;

/** The lines of `markdown` outside fenced code blocks, with inline code spans blanked. */
function proseLines(markdown: string): string[] {
  const out: string[] = [];
  let fence: string | undefined;
  for (const line of markdown.split('\n')) {
    const m = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
    if (m?.[1]) {
      const marker = m[1];
      if (fence === undefined) fence = marker;
      else if (marker[0] === fence[0] && marker.length >= fence.length) fence = undefined;
      continue;
    }
    if (fence === undefined) out.push(line.replace(/(`+)[^`]*?\1/g, '``'));
  }
  return out;
}

/** GitHub's heading anchor (github-slugger): lower case, punctuation dropped, spaces to hyphens. */
function slug(headingText: string): string {
  return headingText
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** The text a heading renders to: code spans keep their content, links their text, emphasis markers go. */
function headingText(raw: string): string {
  return raw
    .replace(/\s+#+\s*$/, '')
    .replace(/`([^`]*)`/g, '$1')
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/(\*\*|__|\*)/g, '')
    .trim();
}

/** Every anchor `markdown` defines: its headings' slugs (repeats get `-1`, `-2`, … as on GitHub) and HTML ids. */
function anchors(markdown: string): Set<string> {
  const out = new Set<string>();
  const seen = new Map<string, number>();
  let fence: string | undefined;
  for (const line of markdown.split('\n')) {
    const m = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
    if (m?.[1]) {
      if (fence === undefined) fence = m[1];
      else if (m[1][0] === fence[0] && m[1].length >= fence.length) fence = undefined;
      continue;
    }
    if (fence !== undefined) continue;
    const h = /^\s{0,3}#{1,6}\s+(.*)$/.exec(line);
    if (h) {
      const base = slug(headingText(h[1] ?? ''));
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      out.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const id of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) out.add(id[1] ?? '');
  }
  return out;
}

/** Link targets in `markdown`'s prose: inline links and images, and reference definitions. */
function linkTargets(markdown: string): string[] {
  const out: string[] = [];
  for (const line of proseLines(markdown)) {
    for (const m of line.matchAll(/!?\[[^\]]*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)/g)) {
      out.push((m[1] ?? '').replace(/^<|>$/g, ''));
    }
    const def = /^\s{0,3}\[[^\]]+\]:\s*(\S+)/.exec(line);
    if (def?.[1]) out.push(def[1]);
  }
  return out;
}

const isExternal = (target: string) => /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//');

/**
 * The relative links of the markdown file `file` (text `markdown`) that do not
 * resolve: a missing file, or an anchor that is not a heading of the target.
 */
function brokenLinks(file: string, markdown: string, read: (path: string) => string | undefined = readIfExists): string[] {
  const broken: string[] = [];
  for (const target of linkTargets(markdown)) {
    if (isExternal(target)) continue;
    const hash = target.indexOf('#');
    const pathPart = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
    const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
    const path = pathPart === '' ? file : resolve(dirname(file), pathPart);
    const text = pathPart === '' ? markdown : read(path);
    if (text === undefined) {
      broken.push(`${target}: no file ${relative(ROOT, path)}`);
      continue;
    }
    if (anchor && path.endsWith('.md') && !anchors(text).has(anchor)) {
      broken.push(`${target}: no heading #${anchor} in ${relative(ROOT, path)}`);
    }
  }
  return broken;
}

function readIfExists(path: string): string | undefined {
  if (!existsSync(path)) return undefined;
  // A link to a folder is fine (GitHub shows its listing); it has no headings to check.
  return statSync(path).isDirectory() ? '' : readFileSync(path, 'utf8');
}

const docFiles = [
  join(ROOT, 'README.md'),
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => join(ROOT, 'docs', f)),
];

/** docs/benchmarks/*.md: each bench's dated history, reached from docs/benchmarks.md rather than README.md. */
const benchmarkHistoryFiles = readdirSync(join(ROOT, 'docs', 'benchmarks'))
  .filter((f) => f.endsWith('.md'))
  .sort()
  .map((f) => join(ROOT, 'docs', 'benchmarks', f));

describe('documentation links', () => {
  describe('the checker', () => {
    const file = join(ROOT, 'docs', 'example.md');
    const files: Record<string, string> = {
      [join(ROOT, 'docs', 'other.md')]: '# Other\n\n## Settings (`channels.webhooks.<name>`)\n\n## Replies\n\n## Replies\n\n```sh\n# not a heading\n```\n',
    };
    const read = (p: string) => files[p];

    it('accepts links to existing files and their headings, slugged as GitHub does', () => {
      const md = '[a](other.md) [b](other.md#settings-channelswebhooksname) [c](other.md#replies-1) [d](#local-heading)\n\n## Local heading\n';
      expect(brokenLinks(file, md, read)).toEqual([]);
    });

    it('reports a missing file and a missing heading', () => {
      const md = '[a](missing.md) [b](other.md#no-such-heading) [c](other.md#not-a-heading)';
      expect(brokenLinks(file, md, read)).toEqual([
        'missing.md: no file docs/missing.md',
        'other.md#no-such-heading: no heading #no-such-heading in docs/other.md',
        'other.md#not-a-heading: no heading #not-a-heading in docs/other.md',
      ]);
    });

    it('ignores external links and links inside code', () => {
      const md = '[x](https://example.com/a.md) `[y](nope.md)`\n\n```md\n[z](nope.md)\n```\n';
      expect(brokenLinks(file, md, read)).toEqual([]);
    });
  });

  for (const path of [...docFiles, ...benchmarkHistoryFiles]) {
    it(`${relative(ROOT, path)}: every relative link points to an existing file and heading`, () => {
      const broken = brokenLinks(path, readFileSync(path, 'utf8'));
      expect(broken, `broken links:\n${broken.join('\n')}`).toEqual([]);
    });
  }
});

describe('README.md', () => {
  it(`stays under ${README_MAX_LINES} lines`, () => {
    const lines = readFileSync(join(ROOT, 'README.md'), 'utf8').split('\n').length;
    expect(lines).toBeLessThan(README_MAX_LINES);
  });

  it('links into every document in docs/', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const linked = new Set(linkTargets(readme).map((t) => t.split('#')[0]));
    const missing = docFiles
      .slice(1)
      .map((p) => relative(ROOT, p))
      .filter((p) => !linked.has(p));
    expect(missing).toEqual([]);
  });
});
