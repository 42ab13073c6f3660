// Pictures of a page for a model that perceives images (SPEC.md `input:image`; docs/decisions/0091): what is in view,
// or the part of one element that is, as a JPEG within a size bound. The picture goes to the model only; the tool_end
// frame and the stored message get a line of text saying what it shows and how big it is.
import type { Page } from 'playwright-core';
import { MAX_PROMPT_IMAGES } from '../chat/history.js';
import type { ServerToolOutcome } from '../chat/tools.js';
import type { ModelImage } from '../models/port.js';
import { VIEWPORT } from './pool.js';

/** JPEG qualities tried in turn until the picture fits MAX_PICTURE_BYTES: a busy page at 70 can weigh more. */
const QUALITIES = [70, 45, 25] as const;
/** The most one picture may weigh (its base64 in the request is a third more). */
export const MAX_PICTURE_BYTES = 400 * 1024;

export interface PagePicture {
  image: ModelImage;
  /** CSS pixels (the viewport's device scale is 1, so these are the image's own). */
  width: number;
  height: number;
  bytes: number;
  quality: number;
}

interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

/**
 * The page's view, or with `ref` the part of that element in view once it is scrolled to (never bigger than the
 * screen, however large the element), as JPEG at the first quality that fits MAX_PICTURE_BYTES.
 */
export async function pictureOf(page: Page, timeout: number, ref?: string): Promise<PagePicture> {
  const view = page.viewportSize() ?? VIEWPORT;
  let clip: Box | undefined;
  if (ref) {
    const element = page.getByRef(ref);
    await element.scrollIntoViewIfNeeded({ timeout });
    const box = await element.boundingBox({ timeout });
    clip = box ? inView(box, view) : undefined;
    if (!clip) throw new Error(`element ${ref} is not in view (hidden, or of no size)`);
  }
  const size = clip ? { width: Math.round(clip.width), height: Math.round(clip.height) } : view;
  for (const quality of QUALITIES) {
    const bytes = await page.screenshot({ type: 'jpeg', quality, timeout, ...(clip ? { clip } : {}) });
    if (bytes.length <= MAX_PICTURE_BYTES) return { image: { mediaType: 'image/jpeg', data: bytes.toString('base64') }, ...size, bytes: bytes.length, quality };
  }
  throw new Error(`the picture weighs more than ${MAX_PICTURE_BYTES / 1024} KiB even at JPEG quality ${QUALITIES.at(-1)}`);
}

/** The box cut to the viewport; undefined when nothing of it is left. */
function inView(box: Box, view: { width: number; height: number }): Box | undefined {
  const x = Math.max(0, box.x);
  const y = Math.max(0, box.y);
  const width = Math.min(view.width, box.x + box.width) - x;
  const height = Math.min(view.height, box.y + box.height) - y;
  return width >= 1 && height >= 1 ? { x, y, width, height } : undefined;
}

/** What a screenshot answers: the picture for the model, and for everyone else a line saying what it shows. */
export function screenshotOutcome(picture: PagePicture, page: { url: string; title: string }, ref?: string): ServerToolOutcome {
  const what = ref ? `element ${ref} of ${page.url}` : page.url;
  const title = page.title === '' ? '' : ` ("${page.title}")`;
  return {
    ok: true,
    text:
      `Screenshot of ${what}${title}: ${picture.width}×${picture.height} pixels, JPEG, ${Math.ceil(picture.bytes / 1024)} KiB. ` +
      `The picture follows as an image; you are shown it during this turn only (the newest ${MAX_PROMPT_IMAGES} pictures), ` +
      'and it is not kept in the conversation: take another screenshot to look again later.',
    images: [picture.image],
  };
}
