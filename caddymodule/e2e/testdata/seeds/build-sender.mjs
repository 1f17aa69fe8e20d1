// Compiles the glue sender.ts, with the platform's sender it imports from SEEDS_DIR/sender, into
// one ES module at OUT. The sender's files use top-level await and extensionless imports, and no
// package.json of theirs says they are ES modules: esbuild reads them as such, changing nothing.
import { build } from "esbuild";

await build({
  entryPoints: [new URL("./sender.ts", import.meta.url).pathname],
  bundle: true,
  format: "esm",
  platform: "node",
  outfile: process.env.OUT,
  alias: { seeds: process.env.SEEDS_DIR },
  logLevel: "warning",
});
