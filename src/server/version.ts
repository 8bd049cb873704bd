/** The leasehold version reported by the server (kept in step with package.json). */
export const VERSION = '0.1.0';
