import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backoffSeconds, DEFAULT_BACKOFF, retryDelaySeconds, throttleDelaySeconds } from '../src/queue/backoff.ts';

test('backoff doubles from 10 s and is capped at 5 minutes', () => {
  const seconds = [1, 2, 3, 4, 5, 6, 7, 20, 100].map((attempts) => backoffSeconds(attempts));
  assert.deepEqual(seconds, [10, 20, 40, 80, 160, 300, 300, 300, 300]);
});

test('backoff base and cap are configurable', () => {
  assert.equal(backoffSeconds(3, { baseSeconds: 1, capSeconds: 60 }), 8);
  assert.equal(backoffSeconds(10, { baseSeconds: 1, capSeconds: 60 }), 60);
  assert.equal(backoffSeconds(0), 5);
});

test('a retry-after wins only when it is longer than the backoff', () => {
  assert.equal(retryDelaySeconds(1, DEFAULT_BACKOFF, 30_000), 30);
  assert.equal(retryDelaySeconds(1, DEFAULT_BACKOFF, 2_000), 10);
  assert.equal(retryDelaySeconds(2, DEFAULT_BACKOFF), 20);
});

test('a throttle without a retry-after backs off by the throttles before it; a retry-after is taken as given', () => {
  const seconds = [0, 1, 2, 3, 4, 5, 6, 40].map((throttles) => throttleDelaySeconds(throttles, DEFAULT_BACKOFF));
  assert.deepEqual(seconds, [5, 10, 20, 40, 80, 160, 300, 300]);
  assert.equal(throttleDelaySeconds(6, DEFAULT_BACKOFF, 2_000), 2);
  assert.equal(throttleDelaySeconds(0, DEFAULT_BACKOFF, 120_000), 120);
});
