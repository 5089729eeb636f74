'use strict';
// The /mongo/{name} lookup and the /gridfs/{path} download, shared by node-http and node-express. The
// contestant passes its own `mongodb` module because it is installed in the contestant's node_modules, not here.

// One MongoClient (and its connection pool, the driver's default maxPoolSize of 100) per process; the
// driver connects on the first query. The URL's path names the database.
function connectFixture(mongodb, url) {
  const db = new mongodb.MongoClient(url).db();
  return { docs: db.collection('docs'), bucket: new mongodb.GridFSBucket(db, { bucketName: 'fs' }) };
}

// One query by _id per request; null when there is no such document.
function findDoc(docs, name) {
  return docs.findOne({ _id: name });
}

// The newest file stored under `name`, streamed chunk by chunk with the driver's GridFSBucket read stream.
// Its 'file' event (the files document, found before any chunk is read) gives the length for the head;
// a missing file fails the stream with code ENOENT before anything was sent: 404.
function streamGridfsFile(bucket, name, res, contentType) {
  const download = bucket.openDownloadStreamByName(name);
  download.once('file', (file) => {
    res.statusCode = 200;
    res.setHeader('Content-Type', contentType);
    res.setHeader('Content-Length', file.length);
  });
  download.once('error', (err) => {
    if (res.headersSent) return res.destroy(err);
    const missing = err.code === 'ENOENT';
    const body = missing ? 'not found' : `database error: ${err.message}`;
    res.writeHead(missing ? 404 : 500, { 'Content-Type': 'text/plain', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  });
  download.pipe(res);
}

module.exports = { connectFixture, findDoc, streamGridfsFile };
