// moleculer-db-adapter-mongo ships the MongoDB 3.7 driver, which has no type declarations; only the
// tests use it directly (lib/storage/store.ts declares the few collection methods it calls).
declare module "mongodb";
