// Server-Sent Events read from a fetch() response body (POST and custom headers, which
// EventSource cannot send).

function parse(block) {
  let id = null;
  let name = null;
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "id") id = Number.parseInt(value, 10);
    else if (field === "event") name = value;
    else if (field === "data") data.push(value);
  }
  if (name === null && !data.length) return null;
  let parsed = {};
  try {
    parsed = data.length ? JSON.parse(data.join("\n")) : {};
  } catch {
    parsed = { raw: data.join("\n") };
  }
  return { id: Number.isNaN(id) ? null : id, name: name || "message", data: parsed };
}

/** Yields {id, name, data} for each event of the response, until the body ends. */
export async function* readEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replace(/\r\n?/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const event = parse(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        if (event) yield event;
      }
    }
  } finally {
    reader.cancel().catch(() => null);
  }
}
