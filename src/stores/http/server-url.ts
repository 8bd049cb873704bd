import { invalidArgument } from '../../core/errors.js';

/**
 * The base URL of a leasehold server, validated, without a trailing slash. Throws
 * `ERR_INVALID_ARGUMENT` naming `url` (and `options` when there are none).
 */
export function parseServerUrl(options: { readonly url: string } | null | undefined): URL {
  if (typeof options !== 'object' || options === null) {
    throw invalidArgument('options', 'must be an object with a url', options);
  }
  let base: URL;
  try {
    base = new URL(options.url);
  } catch {
    throw invalidArgument(
      'url',
      'must be an http(s) URL such as http://127.0.0.1:7400',
      options.url,
    );
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') {
    throw invalidArgument('url', 'must be an http(s) URL', options.url);
  }
  return base;
}
