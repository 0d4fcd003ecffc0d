import { describe, expect, it } from 'vitest';
import { EXTERNAL_CONTENT_TAG, externalContent } from '../../plugins/local-agent/external-content.js';

describe('externalContent', () => {
  it('keeps its closing tag within maxChars when a long attribute leaves no room for the body', () => {
    const server = `${'<'.repeat(200)}${'s'.repeat(300)}`;
    const { content, cut } = externalContent({ server }, 'the tool failed: '.repeat(40), { source: 'mcp', maxChars: 500 });
    expect(content.length).toBeLessThanOrEqual(500);
    expect(content.endsWith(`\n</${EXTERNAL_CONTENT_TAG}>`)).toBe(true);
    expect(content.startsWith(`<${EXTERNAL_CONTENT_TAG} server="&lt;`)).toBe(true);
    // The attribute is cut at a whole entity and stays closed.
    expect(content).toMatch(/server="(&lt;)+">\n/);
    expect(cut).toBe(true);
  });
});
