import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  compileRoute,
  matchRequest,
  type RouteMatch,
} from '../../../src/fencing/gateway/routes.js';

const noHeaders = (): undefined => undefined;

function scopeOf(m: RouteMatch): string {
  assert.equal(m.status, 'fenced', JSON.stringify(m));
  return m.scope;
}

describe('gateway routes: scope templates', () => {
  it('fills a template from several parameters, in the template order, with literal text between', () => {
    const routes = [
      compileRoute(
        { methods: ['PUT'], path: '/t/:tenant/reports/:id', scope: 'r/{id}@{tenant}/{id}' },
        'routes[0]',
      ),
    ];
    assert.equal(
      scopeOf(matchRequest(routes, 'PUT', '/t/acme/reports/7', noHeaders)),
      'r/7@acme/7',
    );
    assert.equal(matchRequest(routes, 'PUT', '/t/acme/reports', noHeaders).status, 'unmatched');
  });

  it('decodes percent-encoded parameters, and refuses broken percent-encoding', () => {
    const routes = [compileRoute({ path: '/items/:id', scope: 'item/{id}' }, 'routes[0]')];
    assert.equal(scopeOf(matchRequest(routes, 'PUT', '/items/a%20b%2Fc', noHeaders)), 'item/a b/c');
    assert.equal(scopeOf(matchRequest(routes, 'PUT', '/items/plain-1', noHeaders)), 'item/plain-1');
    assert.equal(matchRequest(routes, 'PUT', '/items/%E0%A4%A', noHeaders).status, 'invalid');
  });

  it('takes the rest of the path with * and {*}', () => {
    const routes = [compileRoute({ path: '/files/*', scope: 'file:{*}' }, 'routes[0]')];
    assert.equal(
      scopeOf(matchRequest(routes, 'POST', '/files/a/b/c.txt', noHeaders)),
      'file:a/b/c.txt',
    );
  });

  it('a template without parameters names one scope for every match', () => {
    const routes = [compileRoute({ path: '/config', scope: 'the-config' }, 'routes[0]')];
    assert.equal(scopeOf(matchRequest(routes, 'PATCH', '/config', noHeaders)), 'the-config');
    assert.equal(matchRequest(routes, 'GET', '/config', noHeaders).status, 'unfenced');
  });

  it('checks a scope header against the template', () => {
    const routes = [
      compileRoute({ path: '/items/:id', scope: 'item/{id}', scopeHeader: 'X-Scope' }, 'routes[0]'),
    ];
    const header = (v: string) => (n: string) => (n === 'x-scope' ? v : undefined);
    assert.equal(scopeOf(matchRequest(routes, 'PUT', '/items/4', header('item/4'))), 'item/4');
    assert.equal(matchRequest(routes, 'PUT', '/items/4', header('item/5')).status, 'invalid');
  });
});
