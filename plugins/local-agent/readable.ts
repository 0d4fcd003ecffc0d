/**
 * Readable text of an HTML page: Mozilla Readability (the Firefox reader
 * view) on a light DOM (linkedom) keeps the article and drops navigation,
 * ads, scripts, forms and footers; the article becomes plain text with
 * paragraphs, list items and headings on lines of their own. A page
 * Readability finds no article in gives its body text, with scripts, styles
 * and page chrome removed. Both libraries load on the first page read.
 * Synchronous work, seconds on a crafted page: `http_fetch` runs it in a
 * worker thread (page-reader.ts).
 */

/** This module, for the worker threads that read pages (page-reader.ts). */
export const READABLE_MODULE = import.meta.url;

/** The title and text of a page. */
export interface ReadablePage {
  /** The article's title (or the document's), when it has one. */
  title: string | undefined;
  /** The text, paragraphs separated by blank lines. */
  text: string;
}

/** The little of a DOM node the text walk reads (no DOM types in this build: linkedom's nodes have these). */
interface DomElement {
  remove(): void;
  getAttribute(name: string): string | null;
  parentElement: { closest(selector: string): unknown } | null;
}
interface DomParent {
  querySelectorAll(selector: string): ArrayLike<DomElement>;
}
interface DomNode {
  nodeType: number;
  textContent: string | null;
  childNodes: ArrayLike<DomNode>;
  tagName?: string;
}

type Libraries = { parseHTML: typeof import('linkedom').parseHTML; Readability: typeof import('@mozilla/readability').Readability };
let libraries: Promise<Libraries> | undefined;
const load = (): Promise<Libraries> =>
  (libraries ??= Promise.all([import('linkedom'), import('@mozilla/readability')]).then(([l, r]) => ({ parseHTML: l.parseHTML, Readability: r.Readability })));

/** Elements that are never the article: removed before Readability reads the page (and from the fallback's body). */
const CHROME =
  'script, style, noscript, template, svg, canvas, iframe, object, embed, nav, form, button, dialog, [hidden], [aria-hidden="true"], [role="dialog"], [role="navigation"], [role="banner"], [role="contentinfo"]';
/** Page-level header, footer and sidebars (not those inside an article). */
const PAGE_PARTS = ['header', 'footer', 'aside'];
/** A class or id token naming an ad, a sponsor slot or a consent banner. */
const NOISE = /^(ads?|adv|advert\w*|sponsor\w*|promo\w*|ad[-_]\w+|\w+[-_]ads?|cookie\w*|consent\w*|gdpr\w*|paywall\w*|newsletter\w*)$/i;

/** Removes what is never the article: scripts, page chrome, ads, consent banners. */
function strip(root: DomParent): void {
  for (const el of Array.from(root.querySelectorAll(CHROME))) el.remove();
  for (const el of Array.from(root.querySelectorAll(PAGE_PARTS.join(', ')))) if (!el.parentElement?.closest('article, main, [role="main"]')) el.remove();
  for (const el of Array.from(root.querySelectorAll('[class], [id]'))) {
    const tokens = `${el.getAttribute('class') ?? ''} ${el.getAttribute('id') ?? ''}`.split(/\s+/);
    if (tokens.some((t) => NOISE.test(t))) el.remove();
  }
}

/** The readable title and text of `html` fetched from `url`. */
export async function readableText(html: string, url: string): Promise<ReadablePage> {
  const { parseHTML, Readability } = await load();
  const { document } = parseHTML(html);
  // Readability resolves relative links against the page; linkedom's document has no URL of its own.
  Object.defineProperty(document, 'documentURI', { value: url });
  Object.defineProperty(document, 'baseURI', { value: url });
  const fallbackTitle = clean(document.querySelector('title')?.textContent ?? '') || undefined;
  strip(document as unknown as DomParent);
  // On a copy: Readability changes the document it reads, and the fallback below needs the original.
  const copy = document.cloneNode(true) as typeof document;
  const article = new Readability<DomNode>(copy, { serializer: (node: unknown) => node as DomNode }).parse();
  const content = article?.content;
  if (content) {
    const text = toText(content);
    if (text) return { title: clean(article.title ?? '') || fallbackTitle, text };
  }
  const body = document.body ?? document.documentElement;
  if (!body) return { title: fallbackTitle, text: '' };
  return { title: fallbackTitle, text: toText(body as unknown as DomNode) };
}

const BLOCKS = new Set([
  'P',
  'DIV',
  'SECTION',
  'ARTICLE',
  'MAIN',
  'BLOCKQUOTE',
  'PRE',
  'TABLE',
  'TR',
  'UL',
  'OL',
  'DL',
  'DT',
  'DD',
  'FIGURE',
  'FIGCAPTION',
  'HR',
  'ADDRESS',
  'DETAILS',
  'SUMMARY',
]);
const HEADINGS: Record<string, string> = { H1: '# ', H2: '## ', H3: '### ', H4: '#### ', H5: '##### ', H6: '###### ' };
const SKIPPED = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'SVG']);

/** Text of `root`: blocks and headings as paragraphs, list items as `- ` lines, `<br>` as a line break, whitespace collapsed. */
function toText(root: DomNode): string {
  const out: string[] = [];
  const walk = (node: DomNode, pre: boolean) => {
    if (node.nodeType === 3) {
      const text = node.textContent ?? '';
      out.push(pre ? text : text.replace(/\s+/g, ' '));
      return;
    }
    if (node.nodeType !== 1 && node.nodeType !== 9 && node.nodeType !== 11) return;
    const tag = node.tagName?.toUpperCase() ?? '';
    if (SKIPPED.has(tag)) return;
    const [before, after] = marks(tag);
    out.push(before);
    if (tag !== 'BR') for (const child of Array.from(node.childNodes)) walk(child, pre || tag === 'PRE');
    out.push(after);
  };
  walk(root, false);
  return out
    .join('')
    .split('\n')
    .map((line) => line.replace(/[ \t]+$/, '').replace(/^ /, ''))
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

/** What an element puts before and after its text. */
function marks(tag: string): [string, string] {
  const heading = HEADINGS[tag];
  if (heading !== undefined) return [`\n\n${heading}`, '\n\n'];
  if (BLOCKS.has(tag)) return ['\n\n', '\n\n'];
  if (tag === 'BR') return ['\n', ''];
  if (tag === 'LI') return ['\n- ', ''];
  if (tag === 'TD' || tag === 'TH') return [' | ', ''];
  return ['', ''];
}

/** `text` with whitespace collapsed. */
const clean = (text: string): string => text.replace(/\s+/g, ' ').trim();
