import { createRequire } from 'node:module';
import { tempDir } from './tmp.js';

/** The part of s3rver 3 the tests use (it ships no types). */
interface S3rverServer {
  run(): Promise<{ address: string; port: number }>;
  close(): Promise<void>;
}
type S3rverClass = new (options: Record<string, unknown>) => S3rverServer;

/**
 * A throwaway S3-protocol server (s3rver: files on disk) on a free loopback port with one
 * bucket, and the client settings to reach it. Known gaps of s3rver 3.7: it ignores
 * `If-None-Match` on PutObject (it overwrites), and it keeps LastModified to the second.
 */
export async function startS3rver(bucket: string): Promise<{
  endpoint: string;
  clientConfig: Record<string, unknown>;
  stop: () => Promise<void>;
}> {
  const S3rver = createRequire(import.meta.url)('s3rver') as S3rverClass;
  const dir = tempDir('s3rver');
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory: dir.dir,
    configureBuckets: [{ name: bucket }],
  });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    clientConfig: {
      endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    },
    stop: async () => {
      await server.close();
      dir.remove();
    },
  };
}
