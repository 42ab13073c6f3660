// How a forgotten subject is kept where it must still be recognised (docs/decisions/0074): a digest of the tenant and
// the identity path, so a token for that subject can be refused without the record spelling out whom it was for.
import { createHash } from 'node:crypto';

/** The SHA-256 of the tenant id and the subject, hex: the same subject in another tenant gives another digest. */
export function forgottenSubjectDigest(tenantId: string, subject: string): string {
  return createHash('sha256').update(`${tenantId.toLowerCase()}\n${subject}`).digest('hex');
}
