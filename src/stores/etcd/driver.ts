import type * as Etcd3Module from 'etcd3';
import { requirePeer } from '../../core/runtime/peer-packages.js';

/**
 * The etcd3 driver, loaded when the etcd store is first imported: without etcd3 that import
 * fails with an error naming the package and the command that installs it (decision 012).
 * etcd3 is CommonJS, and Node gives `require` and `import` the same module instance, so its
 * error classes are the ones its client throws.
 */
export const etcd3 = requirePeer<typeof Etcd3Module>('etcd3', 'leasehold/etcd');
