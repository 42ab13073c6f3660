// The arithmetic of the host users sandboxes run as: one each while it runs, the workspace's own when it is free.
import { describe, expect, it } from 'vitest';
import { HostUsers, HostUsersExhaustedError } from './host-users.js';

describe('HostUsers', () => {
  it('gives each running sandbox its own user, the one its workspace belongs to when free, and refuses past the range', () => {
    const users = new HostUsers(100, 3);
    expect(users.claim('a')).toBe(100);
    // b's workspace belongs to 102: it keeps it; c's belongs to a's, which runs: c gets the free one.
    expect(users.claim('b', 102)).toBe(102);
    expect(users.claim('c', 100)).toBe(101);
    // Asked again while it runs, a sandbox has the same one.
    expect(users.claim('a', 102)).toBe(100);
    expect(() => users.claim('d')).toThrow(HostUsersExhaustedError);
    // A workspace owner outside the range is never taken as it is.
    users.release('b');
    expect(users.claim('e', 7)).toBe(102);
    expect(users.running()).toBe(3);
  });

  it('moves a user with a sandbox started ahead, and frees it only for the start that holds it', () => {
    const users = new HostUsers(100, 2);
    users.claim('pool-1');
    users.rename('pool-1', 'x');
    expect(users.claim('y')).toBe(101);
    // An earlier life of x ending late does not free the user a later start of x holds.
    users.release('x', 101);
    expect(users.running()).toBe(2);
    users.release('x', 100);
    expect(users.claim('z')).toBe(100);
  });
});
