/**
 * Module-graph rules (run by `npm run lint`). The shape of the house: services/ import shared/,
 * never the reverse; the loop core imports no NATS; nothing imports a cycle.
 * @type {import('dependency-cruiser').IConfiguration}
 */
module.exports = {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment: "Import cycles hide initialisation-order bugs.",
      from: {},
      to: { circular: true },
    },
    {
      name: "shared-not-to-services",
      severity: "error",
      comment: "shared/ is the library; actors depend on it, not the other way round.",
      from: { path: "^shared/" },
      to: { path: "^services/" },
    },
    {
      name: "product-not-to-examples",
      severity: "error",
      comment: "Examples are built on the runtime; the runtime never depends on one.",
      from: { path: "^(shared|services)/" },
      to: { path: "^examples/" },
    },
    {
      name: "core-without-nats",
      severity: "error",
      comment: "The loop core stays pure: NATS adapters live in shared/bus and services/.",
      from: { path: "^shared/(contracts|loop|tools|models|memory|runtime)/" },
      to: { path: "@nats-io" },
    },
    {
      name: "no-test-imports-in-product",
      severity: "error",
      from: { path: "^(shared|services)/" },
      to: { path: "^test/" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { extensions: [".ts", ".js"] },
  },
};
