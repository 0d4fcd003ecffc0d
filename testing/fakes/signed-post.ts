/** POSTs of signed JSON deliveries to an app's webhook, as a platform sends them (the fakes' `post…Delivery` helpers). */

/** POSTs `payload` (JSON, or a string sent as it is) to `url` with `headers`; resolves with the status and the body (JSON when it parses). */
export async function postJson(url: string, payload: unknown, headers: (body: string) => Record<string, string>): Promise<{ status: number; body: any }> {
  const body = typeof payload === 'string' ? payload : JSON.stringify(payload);
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers(body) }, body });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = text;
  }
  return { status: res.status, body: parsed };
}
