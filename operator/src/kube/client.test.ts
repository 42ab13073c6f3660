import { createServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient, withCallDeadline } from './client.js';

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
