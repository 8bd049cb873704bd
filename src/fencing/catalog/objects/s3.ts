import type * as S3Sdk from '@aws-sdk/client-s3';
import type { S3Client, S3ClientConfig } from '@aws-sdk/client-s3';
import { invalidArgument, LeaseholdError } from '../../../core/errors.js';
import { parseHandle } from '../names.js';
import type { ListedObject, ObjectStore } from '../object-store.js';

/** Options for {@link S3ObjectStore}. */
export interface S3ObjectStoreOptions {
  /** The bucket. */
  readonly bucket: string;
  /** A key prefix the catalog owns inside the bucket (`reports/`). Defaults to none. */
  readonly prefix?: string;
  /** Your own client; the store never destroys it. Give this or `clientConfig`. */
  readonly client?: S3Client;
  /**
   * Settings for a client the store makes (and destroys on close). Checksums are computed only
   * when an operation requires them unless you set otherwise (several S3-compatible servers
   * reject the newer default). Defaults to the SDK's environment settings.
   */
  readonly clientConfig?: S3ClientConfig;
}

type Sdk = typeof S3Sdk;

/**
 * Objects in an S3 bucket (or an S3-compatible server), through `@aws-sdk/client-s3` (an
 * optional peer dependency, loaded on first use). A put sends `If-None-Match: *`, so a server
 * that supports conditional writes refuses to overwrite. Safety does not rest on it: keys are
 * unique handles and nothing is visible until the fenced pointer names it; several
 * S3-compatible servers ignore the header and would overwrite silently (no handle is ever
 * written twice by the catalog, so that only matters for a bug or a hand-made key).
 *
 * A put sends the whole object in one request (the body is collected in memory first): up
 * to 5 GiB, the single-request limit of S3.
 *
 * @example
 * const objects = new S3ObjectStore({ bucket: 'reports', clientConfig: { region: 'eu-west-1' } });
 */
export class S3ObjectStore implements ObjectStore {
  readonly description: string;
  private readonly bucket: string;
  private readonly prefix: string;
  private ready: Promise<{ sdk: Sdk; client: S3Client }> | undefined;
  private readonly ownClient: boolean;

  constructor(private readonly options: S3ObjectStoreOptions) {
    if (typeof options !== 'object' || options === null)
      throw invalidArgument('options', 'must be an object', options);
    if (typeof options.bucket !== 'string' || options.bucket === '')
      throw invalidArgument('bucket', 'must be a bucket name', options.bucket);
    const prefix = options.prefix ?? '';
    if (
      typeof prefix !== 'string' ||
      prefix.length > 256 ||
      (prefix !== '' && !prefix.endsWith('/'))
    ) {
      throw invalidArgument(
        'prefix',
        'must be empty or end with "/" (at most 256 characters)',
        prefix,
      );
    }
    if (options.client !== undefined && options.clientConfig !== undefined) {
      throw invalidArgument('client', 'give client or clientConfig, not both', 'both');
    }
    this.bucket = options.bucket;
    this.prefix = prefix;
    this.ownClient = options.client === undefined;
    this.description = `s3://${this.bucket}/${this.prefix}`;
  }

  async put(key: string, body: AsyncIterable<Uint8Array>): Promise<void> {
    const fullKey = this.keyOf(key);
    const parts: Uint8Array[] = [];
    for await (const chunk of body) parts.push(chunk);
    const bytes = Buffer.concat(parts);
    const { sdk, client } = await this.connect();
    try {
      await client.send(
        new sdk.PutObjectCommand({
          Bucket: this.bucket,
          Key: fullKey,
          Body: bytes,
          ContentLength: bytes.length,
          IfNoneMatch: '*',
        }),
      );
    } catch (err) {
      throw this.failure('put', key, err);
    }
  }

  async get(key: string): Promise<Buffer | undefined> {
    const fullKey = this.keyOf(key);
    const { sdk, client } = await this.connect();
    try {
      const r = await client.send(new sdk.GetObjectCommand({ Bucket: this.bucket, Key: fullKey }));
      if (r.Body === undefined) return Buffer.alloc(0);
      return Buffer.from(await r.Body.transformToByteArray());
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw this.failure('get', key, err);
    }
  }

  async delete(key: string): Promise<void> {
    const fullKey = this.keyOf(key);
    const { sdk, client } = await this.connect();
    try {
      await client.send(new sdk.DeleteObjectCommand({ Bucket: this.bucket, Key: fullKey }));
    } catch (err) {
      if (isNotFound(err)) return;
      throw this.failure('delete', key, err);
    }
  }

  async *list(): AsyncIterable<ListedObject> {
    const { sdk, client } = await this.connect();
    let token: string | undefined;
    for (let page = 0; page < 1_000_000; page++) {
      let r;
      try {
        r = await client.send(
          new sdk.ListObjectsV2Command({
            Bucket: this.bucket,
            ...(this.prefix === '' ? {} : { Prefix: this.prefix }),
            ...(token === undefined ? {} : { ContinuationToken: token }),
          }),
        );
      } catch (err) {
        throw this.failure('list', this.prefix, err);
      }
      for (const o of r.Contents ?? []) {
        if (o.Key === undefined || !o.Key.startsWith(this.prefix)) continue;
        yield {
          key: o.Key.slice(this.prefix.length),
          size: o.Size ?? 0,
          modifiedAtMs: o.LastModified?.getTime() ?? Date.now(),
        };
      }
      if (r.IsTruncated !== true || r.NextContinuationToken === undefined) return;
      token = r.NextContinuationToken;
    }
  }

  async close(): Promise<void> {
    if (this.ready === undefined || !this.ownClient) return;
    const c = await this.ready.catch(() => undefined);
    c?.client.destroy();
  }

  private connect(): Promise<{ sdk: Sdk; client: S3Client }> {
    this.ready ??= import('@aws-sdk/client-s3').then(
      (sdk) => ({
        sdk,
        client:
          this.options.client ??
          new sdk.S3Client({
            requestChecksumCalculation: 'WHEN_REQUIRED',
            responseChecksumValidation: 'WHEN_REQUIRED',
            ...this.options.clientConfig,
          }),
      }),
      (err: unknown) => {
        this.ready = undefined;
        throw new LeaseholdError(
          'ERR_UNAVAILABLE',
          `the S3 object store needs @aws-sdk/client-s3: ${String(err)}`,
          { cause: err },
        );
      },
    );
    return this.ready;
  }

  private keyOf(key: string): string {
    parseHandle(key, 'key');
    return this.prefix + key;
  }

  private failure(what: string, key: string, err: unknown): LeaseholdError {
    const status = (err as { $metadata?: { httpStatusCode?: number } } | null)?.$metadata
      ?.httpStatusCode;
    const name = (err as { name?: unknown } | null)?.name;
    return new LeaseholdError(
      'ERR_UNAVAILABLE',
      `S3 ${what} of ${key} in ${this.description} failed: ${String(name ?? err)}${status === undefined ? '' : ` (HTTP ${status})`}`,
      { cause: err },
    );
  }
}

function isNotFound(err: unknown): boolean {
  const e = err as { name?: unknown; $metadata?: { httpStatusCode?: number } } | null;
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
}
