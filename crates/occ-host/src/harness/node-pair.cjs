// occ: hands the node host its one-time setup code without putting it on the command line
// (/proc/<pid>/cmdline is world-readable). Loaded with `node --require` before openclaw.mjs:
// reads the private file named by OCC_NODE_SETUP_CODE_FILE and appends
// `--pair-if-needed <code>` to process.argv, which OpenClaw's command parser reads. A missing
// or empty file adds nothing (the node then reconnects with its saved device token).
"use strict";
const fs = require("node:fs");
const file = process.env.OCC_NODE_SETUP_CODE_FILE;
delete process.env.OCC_NODE_SETUP_CODE_FILE;
if (file) {
  let code = "";
  try {
    code = fs.readFileSync(file, "utf8").trim();
  } catch (e) {
    if (e.code !== "ENOENT") throw e;
  }
  if (code) process.argv.push("--pair-if-needed", code);
}
