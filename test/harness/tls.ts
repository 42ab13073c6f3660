// Throwaway TLS certificates for test servers on loopback (a fake provider, a fake API server): self-signed, so a
// client trusts one only when told to, and verification stays on as in production.
import { generate } from 'selfsigned';

/** A self-signed certificate (its own CA) for one DNS name or IP address, with its key, in PEM. */
export async function selfSignedCertificate(subject: { dns: string } | { ip: string }): Promise<{ key: string; cert: string }> {
  const name = 'dns' in subject ? subject.dns : subject.ip;
  const pems = await generate([{ name: 'commonName', value: name }], {
    keyType: 'ec',
    algorithm: 'sha256',
    extensions: [
      { name: 'basicConstraints', cA: true },
      { name: 'subjectAltName', altNames: ['dns' in subject ? { type: 2, value: subject.dns } : { type: 7, ip: subject.ip }] },
    ],
  });
  return { key: pems.private, cert: pems.cert };
}
