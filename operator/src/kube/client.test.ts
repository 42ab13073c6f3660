import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { createServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withCallDeadline } from '@agentplane/lib/kubernetes/kube-config';
import { selfSignedCertificate } from '@agentplane/test/harness/tls';
import { KubeClient } from './client.js';

describe('API calls against an API server that never answers', () => {
  const sockets = new Set<Socket>();
  // Accepts connections and reads requests, answering nothing: a partition that drops packets.
  const silent = createServer((socket) => {
    sockets.add(socket);
    socket.on('data', () => {});
  });
  let kubeConfig: k8s.KubeConfig;

  beforeAll(async () => {
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    kubeConfig = new k8s.KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [{ name: 'silent', server: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`, skipTLSVerify: true }],
      users: [{ name: 'admin', token: 'a-token' }],
      contexts: [{ name: 'silent', cluster: 'silent', user: 'admin' }],
      currentContext: 'silent',
    });
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  it('give up at the deadline, so the reconcile fails and is retried instead of waiting for good', async () => {
    const kube = new KubeClient(withCallDeadline(kubeConfig, 300));
    await expect(kube.get({ apiVersion: 'v1', kind: 'Namespace', name: 'acme' })).rejects.toThrow(/abort|timeout/i);
    await expect(kube.getCustom('Project', 'acme')).rejects.toThrow(/abort|timeout/i);
  });

  it('keep the clusters, users and current context they were given', () => {
    const timed = withCallDeadline(kubeConfig, 300);
    expect(timed.getCurrentCluster()).toEqual(kubeConfig.getCurrentCluster());
    expect(timed.getCurrentUser()).toEqual(kubeConfig.getCurrentUser());
  });
});

describe('API calls against an API server over TLS', () => {
  let server: HttpsServer;
  let connections = 0;
  let kubeConfig: k8s.KubeConfig;

  beforeAll(async () => {
    const certificate = await selfSignedCertificate({ ip: '127.0.0.1' });
    // Answers every read with 404 as the API server does for an absent object.
    server = createHttpsServer(certificate, (req, res) => {
      req.resume();
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 }));
    });
    server.on('connection', () => connections++);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    kubeConfig = new k8s.KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [{ name: 'tls', server: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, caData: Buffer.from(certificate.cert).toString('base64') }],
      users: [{ name: 'admin', token: 'a-token' }],
      contexts: [{ name: 'tls', cluster: 'tls', user: 'admin' }],
      currentContext: 'tls',
    });
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('share kept-alive connections instead of a TCP and TLS handshake per call', async () => {
    const kube = new KubeClient(withCallDeadline(kubeConfig, 5_000));
    for (let i = 0; i < 20; i++) expect(await kube.get({ apiVersion: 'v1', kind: 'Namespace', name: `absent-${i}` })).toBeNull();
    await Promise.all(Array.from({ length: 10 }, (_, i) => kube.getCustom('Project', `absent-${i}`)));
    // One connection for the calls one after another, and at most one more per call made at once.
    expect(connections).toBeGreaterThanOrEqual(1);
    expect(connections).toBeLessThanOrEqual(11);
  });
});
