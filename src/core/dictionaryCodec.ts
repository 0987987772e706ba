/**
 * Raw deflate (node:zlib, no dependency) with a preset dictionary: the codec of everything the engine keeps
 * compressed (journal entries and packed journals, an ended run's events and its spec). Each owner brings its own
 * dictionary (the openings of what it stores, nothing an agent names) and its own marker, so a short value finds its
 * skeleton in the window and a reader knows the form from the first byte. Why deflate and these settings, by
 * measurement: src/core/journal.ts.
 */
import { deflateRawSync, inflateRawSync } from 'node:zlib';

export interface DictionaryCodec {
  /** `plain` compressed. */
  deflate(plain: string | Buffer): Buffer;
  /** The plain bytes of what `deflate` made; throws when they do not inflate. */
  inflate(packed: Buffer): Buffer;
}

export function dictionaryCodec(dictionary: string, level = 6): DictionaryCodec {
  const bytes = Buffer.from(dictionary, 'utf8');
  // A 4 KB window and memLevel 4, by measurement (bench section `bytes`): as small as zlib's defaults here at less CPU
  // (smaller tables to set up per call). A whole ended run's journal packs as small in this window as in 32 KB at half
  // the CPU: a transcript's repeats are near each other. The level is the owner's (level 6 unless it says).
  const deflateOptions = { level, windowBits: 12, memLevel: 4, dictionary: bytes } as const;
  // The largest window: a value written with any window reads back.
  const inflateOptions = { windowBits: 15, dictionary: bytes } as const;
  return {
    deflate: (plain) => deflateRawSync(plain, deflateOptions),
    inflate: (packed) => inflateRawSync(packed, inflateOptions),
  };
}

/** `body` behind a one-byte marker naming its form. */
export function behindMarker(marker: number, body: Buffer): Buffer {
  const out = Buffer.allocUnsafe(body.length + 1);
  out[0] = marker;
  body.copy(out, 1);
  return out;
}
