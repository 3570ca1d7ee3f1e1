// Byte arrays, as the stream parsers keep them: in pieces until they are needed whole.

/**
 * `parts` as one array: the part itself when there is one (no copy), else a new array.
 *
 * @param {Uint8Array[]} parts
 * @returns {Uint8Array}
 */
export function concatBytes(parts) {
  if (parts.length === 1) {
    return parts[0];
  }
  const joined = new Uint8Array(parts.reduce((n, part) => n + part.length, 0));
  let at = 0;
  for (const part of parts) {
    joined.set(part, at);
    at += part.length;
  }
  return joined;
}
