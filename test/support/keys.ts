// One source: the conformance kits of `leasehold/testing` use the same helper.
export { uniqueKey } from '../../src/testing/kit/wait.js';
