// Validates Kubernetes objects against the API's schemas (the npm kubernetes-models validators:
// types, formats, required fields, enums; prometheus-operator's for ServiceMonitor). Reads a JSON
// array of objects on stdin; prints one line per problem, naming the object, and exits 1 if there
// is any. An object whose apiVersion/kind has no model is a problem too, never a pass.
// Usage: node validate_objects.js NODE_MODULES_DIR < objects.json   (make chart-tools installs it)
"use strict";
const path = require("path");
const { pathToFileURL } = require("url");

const modules = process.argv[2];

// The model class of apiVersion/kind, or undefined.
async function model(apiVersion, kind) {
  if (apiVersion.startsWith("monitoring.coreos.com/")) {
    // An ES module only package: imported by file.
    const file = path.join(modules, "@kubernetes-models/prometheus-operator", apiVersion, "index.js");
    return (await import(pathToFileURL(file).href))[kind];
  }
  // kubernetes-models: the core group is "v1", the others "<group>/<version>".
  return require(path.join(modules, "kubernetes-models", apiVersion, kind))[kind];
}

async function main() {
  const objects = JSON.parse(require("fs").readFileSync(0, "utf8"));
  let problems = 0;
  for (const obj of objects) {
    const name = `${obj.kind} ${obj.metadata && obj.metadata.name}`;
    let Model;
    try {
      Model = await model(obj.apiVersion, obj.kind);
    } catch (e) {
      Model = undefined;
    }
    if (typeof Model !== "function") {
      console.log(`${name}: no schema for ${obj.apiVersion} ${obj.kind}`);
      problems++;
      continue;
    }
    try {
      new Model(obj).validate();
    } catch (e) {
      console.log(`${name}: ${e.message}`);
      problems++;
    }
  }
  console.log(`${objects.length} objects, ${problems} problems`);
  process.exit(problems > 0 ? 1 : 0);
}

main();
