'use strict';
// The /mongo/{name} lookup, shared by node-http and node-express. The contestant passes its own
// `mongodb` module because it is installed in the contestant's node_modules, not here.

// One MongoClient (and its connection pool, the driver's default maxPoolSize of 100) per process; the
// driver connects on the first query.
function docsCollection(mongodb, url) {
  return new mongodb.MongoClient(url).db().collection('docs');
}

// One query by _id per request; null when there is no such document.
function findDoc(docs, name) {
  return docs.findOne({ _id: name });
}

module.exports = { docsCollection, findDoc };
