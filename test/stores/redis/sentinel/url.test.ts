import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { isLeaseholdError } from '../../../../src/core/errors.js';
import { parseRedisTopologyUrl } from '../../../../src/stores/open-store.js';
import { RedisSentinelGroup, SENTINEL_MASTER_NAME } from '../../../support/redis-sentinel.js';
import { checkUrlStoreAndEpoch } from '../../../support/url-store-epoch.js';

describe('redis+sentinel:// and redis+cluster:// store URLs', () => {
  let group: RedisSentinelGroup;
  before(async () => {
    group = await RedisSentinelGroup.start();
  });
  after(async () => {
    await group?.stop();
  });

  it('opens from a redis+sentinel:// URL through the sentinels, and leasehold epoch raises every later token above its floor', async () => {
    const sentinels = group.sentinelAddresses.map((s) => `${s.host}:${s.port}`).join(',');
    const prefix = `lh-surl-${randomBytes(3).toString('hex')}:`;
    await checkUrlStoreAndEpoch(
      `redis+sentinel://${sentinels}/${SENTINEL_MASTER_NAME}?prefix=${prefix}`,
      'sentinel',
    );
  });

  it('parses both forms and refuses malformed ones naming the rule, never echoing the password', () => {
    assert.deepEqual(parseRedisTopologyUrl('redis+cluster://u:p%40ss@a:7000,b:7001?prefix=x:'), {
      topology: {
        kind: 'cluster',
        nodes: [
          { host: 'a', port: 7000 },
          { host: 'b', port: 7001 },
        ],
        username: 'u',
        password: 'p@ss',
      },
      prefix: 'x:',
    });
    assert.deepEqual(
      parseRedisTopologyUrl(
        'redis+sentinel://:pw@s1:26379,[::1]:26380/mymaster?sentinelPassword=sp',
      ),
      {
        topology: {
          kind: 'sentinel',
          nodes: [
            { host: 's1', port: 26379 },
            { host: '::1', port: 26380 },
          ],
          name: 'mymaster',
          password: 'pw',
          sentinelPassword: 'sp',
        },
      },
    );
    const refused: [string, RegExp][] = [
      ['redis+sentinel://s1:26379', /names the master/],
      ['redis+cluster://a:7000/0', /has no path/],
      ['redis+cluster://a:7000?sentinelPassword=x', /needs a redis\+sentinel/],
      ['redis+cluster://a:7000?db=1', /"db" is not one of/],
      ['redis+cluster://a', /is not host:port/],
      ['redis+cluster://a:70000', /is not host:port/],
      ['redis+cluster://u:secret@', /must look like/],
    ];
    for (const [url, rule] of refused) {
      assert.throws(
        () => parseRedisTopologyUrl(url),
        (err: unknown) =>
          isLeaseholdError(err) &&
          err.code === 'ERR_INVALID_ARGUMENT' &&
          rule.test(err.message) &&
          !err.message.includes('secret'),
        url,
      );
    }
  });
});
