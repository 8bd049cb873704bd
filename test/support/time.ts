// One source: the conformance kits of `leasehold/testing` use the same helpers.
export { elapse, eventually } from '../../src/testing/kit/wait.js';
