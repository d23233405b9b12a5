// Starts s3rver (npm, tests/interop/js/package.json) on 127.0.0.1 at a free port, serving the
// buckets under DIR, and writes the port to PORT_FILE once listening. Stopped by SIGTERM (by pid,
// from s3_common.py); exits by itself after MAX_LIFETIME seconds.
// Usage: node s3rver_run.cjs DIR PORT_FILE [MAX_LIFETIME]
'use strict';
const fs = require('fs');
const S3rver = require('s3rver');

const [dir, portFile, life] = process.argv.slice(2);
const server = new S3rver({ address: '127.0.0.1', port: 0, directory: dir, silent: true });
server.run().then((addr) => {
  fs.writeFileSync(portFile + '.tmp', `${addr.port}\n`);
  fs.renameSync(portFile + '.tmp', portFile);
}, (err) => {
  console.error(`s3rver: ${err}`);
  process.exit(1);
});
process.on('SIGTERM', () => process.exit(0));
setTimeout(() => process.exit(0), 1000 * Number(life || 240)).unref();
