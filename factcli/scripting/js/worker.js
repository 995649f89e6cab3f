'use strict';
// factcli's JavaScript worker: one long-lived Node.js process per factcli process.
//
// Protocol: newline-delimited JSON. factcli writes requests `{"id": N, "op": "...", ...}` to stdin;
// this worker answers each with one line `{"id": N, "ok": true, "value": ...}` or
// `{"id": N, "ok": false, "phase": "...", "error": {"name", "message", "stack"}}` on stdout, in
// completion order (requests run concurrently). The first line it writes is
// `{"ready": true, "node": "<version>"}`. Anything user code prints goes to stderr, never stdout.
//
// Ops:
//   ping                          -> "pong"
//   assert    {code | file, fn}   -> a javascript assertion's checked result (boolean, number or
//                                    GradingResult); phase "call" on a file function's own error
//   transform {code | file, fn}   -> the transformed value (`undefined: true` when it returned undefined)
//   call      {file, fn, args}    -> a file function's return value (assertScoringFunction)
//   providerLoad {file, fn, key, options} -> {id}: the provider made (once per key) and its id()
//   provider  {file, fn, key, options, prompt, context, callOptions} -> what its callApi returned
//   derived   {code, scores, step}  -> a JavaScript derived metric's number; derivedCheck {code}: it compiles
//   compile   {code, inputType}   -> null, or a SyntaxError (config-time check of a transform)
//   typescript {file, roots}      -> how that TypeScript file runs ({way: 'node' | 'typescript', from}),
//                                    `roots` joining the folders the typescript package is looked for in

const path = require('path');
const util = require('util');
const readline = require('readline');
const { createRequire } = require('module');
const { pathToFileURL } = require('url');

// ---------------------------------------------------------------- stdout belongs to the protocol
const protocolWrite = process.stdout.write.bind(process.stdout);
process.stdout.write = (chunk, encoding, callback) => process.stderr.write(chunk, encoding, callback);
for (const name of ['log', 'info', 'debug', 'trace', 'dir', 'table']) {
  console[name] = (...args) => process.stderr.write(util.format(...args) + '\n');
}

function send(message) {
  let line;
  try {
    line = JSON.stringify(message);
  } catch (err) {
    line = JSON.stringify({
      id: message.id,
      ok: false,
      phase: 'serialize',
      error: describe(new Error(`the result cannot be sent back as JSON: ${err.message}`)),
    });
  }
  protocolWrite(line + '\n');
}

// Stack traces keep the user's frames; the worker's own and Node's internals are noise.
const OWN_FILE = __filename;
const EVAL_FRAME = new RegExp(`eval at \\S+ \\(${OWN_FILE.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:\\d+:\\d+\\), `, 'g');

function userStack(stack) {
  return String(stack)
    .replace(EVAL_FRAME, '')
    .split('\n')
    .filter((line) => !(/^\s+at /.test(line) && (/[( ]node:/.test(line) || line.includes(`${OWN_FILE}:`))))
    .join('\n');
}

function describe(err) {
  if (err instanceof Error) {
    return { name: err.name, message: err.message, stack: userStack(err.stack || `${err.name}: ${err.message}`) };
  }
  return { name: 'Error', message: String(err), stack: String(err) };
}

// A user's stray callback that throws must not take the worker down with every call in flight.
process.on('uncaughtException', (err) => {
  process.stderr.write(`[factcli node worker] uncaught exception: ${err && err.stack ? err.stack : err}\n`);
});
process.on('unhandledRejection', (err) => {
  process.stderr.write(`[factcli node worker] unhandled rejection: ${err && err.stack ? err.stack : err}\n`);
});

// ---------------------------------------------------------------- the `process` given to inline code
// As in promptfoo: inline code sees a `process` whose mainModule.require works.
const userRequire = createRequire(path.join(process.cwd(), '__factcli_inline__.js'));
const processShim = new Proxy(process, {
  get(target, prop) {
    if (prop === 'mainModule') {
      return { require: userRequire, exports: {}, id: '.', filename: '', loaded: true, children: [], paths: [] };
    }
    const value = target[prop];
    return typeof value === 'function' ? value.bind(target) : value;
  },
});

// ---------------------------------------------------------------- TypeScript
// A .ts file runs through Node's own type stripping when this Node has it on (22.6+, started with
// --experimental-strip-types where it is not the default), else through the `typescript` package
// found from the config folders factcli names (the worker's argument, the `typescript` op) or the file's
// own folder: compiled to CommonJS as it is required, and so are the .ts files it imports.
// The TypeScript suffixes are factcli's one list (factcli.sources.TS_SUFFIXES), sent in the argument.
const startArgs = (process.argv[2] && JSON.parse(process.argv[2])) || {};
const TS_SUFFIXES = startArgs.tsSuffixes || [];
const tsRoots = new Set(startArgs.tsRoots || []);
let tsCompiler = null; // {ts, from}: the package the require hook uses

function isTypeScript(file) {
  return TS_SUFFIXES.includes(path.extname(file).toLowerCase());
}

function nodeStripsTypes(file) {
  return Boolean(process.features && process.features.typescript) && path.extname(file).toLowerCase() !== '.tsx';
}

function findTypeScript(file) {
  if (tsCompiler) return tsCompiler;
  for (const dir of [...tsRoots, path.dirname(file)]) {
    let from;
    try {
      from = createRequire(path.join(dir, '__factcli__.js')).resolve('typescript');
    } catch (err) {
      continue;
    }
    const ts = require(from);
    if (typeof ts.transpileModule !== 'function') continue; // not the JavaScript compiler API
    tsCompiler = { ts, from };
    const compile = (module, filename) => {
      const source = require('fs').readFileSync(filename, 'utf8');
      const out = ts.transpileModule(source, {
        fileName: filename,
        compilerOptions: {
          module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2020, esModuleInterop: true,
          jsx: ts.JsxEmit.React,
        },
      });
      module._compile(out.outputText, filename);
    };
    for (const ext of TS_SUFFIXES) require.extensions[ext] = compile;
    return tsCompiler;
  }
  return null;
}

function typeScriptMissing(file) {
  return new Error(
    `${path.basename(file)} is TypeScript: it runs with Node.js 22.6 or later (its own type stripping; ` +
    `this is Node ${process.versions.node}) or with the typescript package installed where the config is ` +
    '(npm install typescript)');
}

// How a TypeScript file will run: {way: 'node'} or {way: 'typescript', from}; an error if neither.
function typeScriptWay(file) {
  if (nodeStripsTypes(file)) return { way: 'node' };
  const found = findTypeScript(file);
  if (found) return { way: 'typescript', from: found.from };
  throw typeScriptMissing(file);
}

// A CommonJS module as import() would give it: its exports as `default`, their names beside it.
function asNamespace(exported) {
  const ns = { default: exported };
  if (exported && (typeof exported === 'object' || typeof exported === 'function')) {
    for (const key of Object.keys(exported)) if (key !== 'default') ns[key] = exported[key];
  }
  return ns;
}

function importFile(file) {
  if (isTypeScript(file) && typeScriptWay(file).way === 'typescript') {
    return Promise.resolve().then(() => asNamespace(require(file)));
  }
  return import(pathToFileURL(file).href);
}

// ---------------------------------------------------------------- loading user files
const modules = new Map();

// The module as promptfoo sees it: default.default, else default, else the namespace.
function moduleNamespace(file) {
  if (!modules.has(file)) {
    const promise = importFile(file);
    modules.set(file, promise);
    promise.catch(() => modules.delete(file)); // a fixed file can be retried
  }
  return modules.get(file);
}
globalThis.__factcliNamespace = moduleNamespace; // factcli's load-time export probe reads through it

async function loadModule(file) {
  const ns = await moduleNamespace(file);
  if (ns && ns.default && ns.default.default !== undefined) return ns.default.default;
  if (ns && ns.default !== undefined) return ns.default;
  return ns;
}

// A named export: on that module, else on the namespace (an ES module with a default export
// and named ones; promptfoo misses those).
async function namedExport(file, name) {
  const mod = await loadModule(file);
  if (mod != null && mod[name] !== undefined) return mod[name];
  const ns = await modules.get(file);
  return ns ? ns[name] : undefined;
}

// ---------------------------------------------------------------- inline code
function isCharEscaped(code, index) {
  let count = 0;
  for (let i = index - 1; i >= 0 && code[i] === '\\'; i--) count++;
  return count % 2 === 1;
}

// The last `;` that separates statements (not one inside a string or template literal).
function lastStatementSemicolon(code) {
  let single = false;
  let double = false;
  let template = false;
  let last = -1;
  for (let i = 0; i < code.length; i++) {
    const ch = code[i];
    if (!isCharEscaped(code, i)) {
      if (ch === "'" && !double && !template) single = !single;
      else if (ch === '"' && !single && !template) double = !double;
      else if (ch === '`' && !single && !double) template = !template;
    }
    if (ch === ';' && !single && !double && !template) last = i;
  }
  return last;
}

// A one-line assertion is an expression, or declarations followed by a final expression.
function assertionBody(code) {
  const text = code.trimEnd();
  if (text.includes('\n')) return text;
  const trimmed = text.trim().replace(/;+\s*$/, '');
  if (/^(const|let|var)\s/.test(trimmed)) {
    const semi = lastStatementSemicolon(trimmed);
    if (semi !== -1) {
      const expression = trimmed.slice(semi + 1).trim();
      if (expression) return `${trimmed.slice(0, semi + 1)} return ${expression}`;
    }
    return trimmed;
  }
  return `return ${trimmed}`;
}

function transformBody(code) {
  return code.includes('\n') ? code : `return ${code}`;
}

// promptfoo's context carries the provider object, whose id is a method.
function reviveContext(context) {
  if (context && context.provider && typeof context.provider === 'object' && typeof context.provider.id === 'string') {
    const id = context.provider.id;
    context.provider = { ...context.provider, id: () => id };
  }
  return context;
}

// ---------------------------------------------------------------- assertion results
function isGradingResult(r) {
  return (
    typeof r === 'object' && r !== null &&
    typeof r.pass === 'boolean' && typeof r.score === 'number' && typeof r.reason === 'string' &&
    (r.namedScores === undefined || typeof r.namedScores === 'object') &&
    (r.namedScoreWeights === undefined || typeof r.namedScoreWeights === 'object') &&
    (r.tokensUsed === undefined || typeof r.tokensUsed === 'object') &&
    (r.componentResults === undefined || Array.isArray(r.componentResults)) &&
    (r.assertion === undefined || r.assertion === null || typeof r.assertion === 'object') &&
    (r.comment === undefined || typeof r.comment === 'string')
  );
}

class ResultError extends Error {}

async function checkedResult(value) {
  const result = await Promise.resolve(value);
  if (typeof result === 'boolean' || typeof result === 'number' || isGradingResult(result)) return result;
  throw new ResultError(
    `Custom function must return a boolean, number, or GradingResult object. Got type ${typeof result}: ${JSON.stringify(result)}`,
  );
}

function encodeResult(result) {
  if (typeof result === 'number' && !Number.isFinite(result)) return { special: String(result) };
  return { value: result };
}

// ---------------------------------------------------------------- ops
class PhaseError extends Error {
  constructor(phase, cause) {
    super(cause && cause.message);
    this.phase = phase;
    this.cause = cause;
  }
}

async function runPhase(phase, fn) {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof PhaseError) throw err;
    throw new PhaseError(phase, err);
  }
}

async function opAssert(req) {
  const context = reviveContext(req.context);
  if (typeof req.file === 'string') {
    const fn = req.fn || null;
    const mod = await runPhase('load', () => loadModule(req.file));
    let target;
    if (fn) {
      target = await namedExport(req.file, fn);
      if (typeof target !== 'function') {
        throw new PhaseError('load', new Error(`${req.file} does not export a function named "${fn}"`));
      }
    } else if (typeof mod === 'function') {
      target = mod;
    } else if (mod && typeof mod.default === 'function') {
      target = mod.default;
    } else {
      throw new PhaseError('load', new Error(
        `Assertion malformed: ${req.file} must export a function or have a default export as a function`));
    }
    const value = await runPhase('call', () => target(req.output, context));
    return runPhase('validate', () => {
      if (!(typeof value === 'boolean' || typeof value === 'number' || typeof value === 'object')) {
        throw new Error(`Javascript assertion script must return a boolean, number, or object (${req.label})`);
      }
      return checkedResult(value);
    }).then(encodeResult);
  }
  const result = await runPhase('call', () => {
    const f = new Function('output', 'context', 'process', assertionBody(req.code));
    return checkedResult(f(req.output, context, processShim));
  });
  return encodeResult(result);
}

async function opTransform(req) {
  const context = req.context;
  let f;
  if (typeof req.file === 'string') {
    const mod = await runPhase('load', () => loadModule(req.file));
    const fn = req.fn || null;
    const named = fn ? await namedExport(req.file, fn) : undefined;
    if (typeof named === 'function') f = named;
    else if (typeof mod === 'function') f = mod;
    else if (mod && typeof mod.default === 'function') f = mod.default;
    else {
      throw new PhaseError('load', new Error(
        `Transform ${req.file} must export a function, have a default export as a function, or export the specified function "${fn}"`));
    }
  } else {
    f = await runPhase('load', () => new Function(req.inputType || 'output', 'context', 'process', transformBody(req.code)));
  }
  const value = await runPhase('call', async () => f(req.input, context, processShim));
  return value === undefined ? { value: null, undefined: true } : { value };
}

async function opCall(req) {
  const mod = await runPhase('load', () => loadModule(req.file));
  const fn = req.fn || null;
  let target;
  if (fn) {
    target = await namedExport(req.file, fn);
    if (typeof target !== 'function') {
      throw new PhaseError('load', new Error(`JavaScript file must export a "${fn}" function`));
    }
  } else {
    const name = req.defaultName || 'func';
    target = typeof mod === 'function' ? mod : (mod && (mod.default || mod[name])) || mod;
    if (typeof target !== 'function') {
      throw new PhaseError('load', new Error(
        `JavaScript file must export a function (as default export or named export "${name}")`));
    }
  }
  const value = await runPhase('call', async () => target(...(req.args || [])));
  return value === undefined ? { value: null, undefined: true } : encodeResult(value);
}

// ---------------------------------------------------------------- providers
// A `file://x.js[:name]` provider as promptfoo loads one: the export (the default, or the name given) is a
// class, constructed once per provider with {id, config, env} (then given its label), whose callApi(prompt, context,
// options) is called for each row. factcli also takes a function (called as callApi) or an object that
// has a callApi method. `req.key` names the provider: one instance per key, kept for the run.
const providers = new Map();

function isClass(value) {
  return typeof value === 'function' && (/^class[\s{]/.test(Function.prototype.toString.call(value)) ||
    Boolean(value.prototype && typeof value.prototype.callApi === 'function'));
}

async function makeProvider(req) {
  const where = req.fn ? `${path.basename(req.file)}:${req.fn}` : path.basename(req.file);
  const target = req.fn ? await namedExport(req.file, req.fn) : await loadModule(req.file);
  if (isClass(target)) {
    const instance = new target({ id: req.options.id, config: req.options.config, env: req.options.env }); // eslint-disable-line new-cap
    if (!instance || typeof instance.callApi !== 'function') {
      throw new Error(`${where}: the provider class has no callApi(prompt, context, options) method`);
    }
    instance.label ||= req.options.label || ''; // promptfoo sets it after making the provider
    return instance;
  }
  if (typeof target === 'function') return { id: () => req.options.id, label: req.options.label || '', callApi: target };
  if (target && typeof target === 'object' && typeof target.callApi === 'function') return target;
  const found = target === undefined ? 'nothing' : (target === null ? 'null' : `a ${typeof target}`);
  throw new Error(req.fn
    ? `${where}: "${req.fn}" is not exported as a provider class or function (found ${found})`
    : `${where} must export a provider class (with callApi) or a function as its default export (found ${found}; ` +
      'name another export with file://' + path.basename(req.file) + ':Name)');
}

function providerFor(req) {
  let made = providers.get(req.key);
  if (!made) {
    made = makeProvider(req);
    providers.set(req.key, made);
    made.catch(() => providers.delete(req.key)); // a fixed file can be retried
  }
  return made;
}

async function opProviderLoad(req) {
  const instance = await runPhase('load', () => providerFor(req));
  let id = null;
  try {
    id = typeof instance.id === 'function' ? String(instance.id()) : (typeof instance.id === 'string' ? instance.id : null);
  } catch (err) {
    throw new PhaseError('load', err);
  }
  return { value: { id } };
}

async function opProvider(req) {
  const instance = await runPhase('load', () => providerFor(req));
  const context = { ...req.context, logger: console };
  const value = await runPhase('call', async () => instance.callApi(req.prompt, context, req.callOptions || {}));
  return value === undefined ? { value: null, undefined: true } : { value };
}

// ---------------------------------------------------------------- derived metrics
// A derivedMetrics value written in JavaScript: a function (`function (namedScores, evalStep) {…}`, an arrow)
// called as promptfoo calls a derived metric's function, or a function body that sees `namedScores` and
// `evalStep` (a one-line expression is returned).
const derivedFunctions = new Map();

function derivedFunction(code) {
  if (!derivedFunctions.has(code)) {
    const text = code.trim();
    const isFunction = /^(async\s+)?function\b/.test(text) || /^(async\s+)?(\([^)]*\)|[A-Za-z_$][\w$]*)\s*=>/.test(text);
    const body = text.includes('\n') || /\breturn\b/.test(text) ? text : `return ${text.replace(/;+\s*$/, '')}`;
    const fn = isFunction ? new Function(`return (${text});`)() : new Function('namedScores', 'evalStep', body);
    derivedFunctions.set(code, fn);
  }
  return derivedFunctions.get(code);
}

async function opDerived(req) {
  const fn = await runPhase('compile', () => derivedFunction(req.code));
  const value = await runPhase('call', async () => fn({ ...req.scores }, req.step || {}));
  return runPhase('validate', () => {
    if (typeof value === 'boolean') return { value: Number(value) };
    if (typeof value !== 'number') throw new Error(`a derived metric must give a number, got ${typeof value}`);
    return encodeResult(value);
  });
}

function opCompile(req) {
  try {
    // eslint-disable-next-line no-new-func
    new Function(req.inputType || 'output', 'context', 'process', transformBody(req.code));
    return { value: null };
  } catch (err) {
    throw new PhaseError('compile', err);
  }
}

const OPS = {
  ping: async () => ({ value: 'pong' }),
  assert: opAssert,
  transform: opTransform,
  call: opCall,
  provider: opProvider,
  providerLoad: opProviderLoad,
  derived: opDerived,
  derivedCheck: async (req) => { await runPhase('compile', () => derivedFunction(req.code)); return { value: null }; },
  compile: async (req) => opCompile(req),
  // For factcli's own tests: exit as if the worker had crashed.
  typescript: async (req) => {
    for (const root of req.roots || []) tsRoots.add(root);
    return { value: typeScriptWay(req.file) };
  },
  __crash: async (req) => process.exit(typeof req.code === 'number' ? req.code : 70),
  __hang: () => new Promise(() => {}),
  __block: async (req) => { const end = Date.now() + (req.ms || 0); while (Date.now() < end) { /* spin */ } return { value: 'done' }; },
};

async function handle(line) {
  let req;
  try {
    req = JSON.parse(line);
  } catch (err) {
    process.stderr.write(`[factcli node worker] bad request line: ${line.slice(0, 200)}\n`);
    return;
  }
  const op = OPS[req.op];
  if (!op) {
    send({ id: req.id, ok: false, phase: 'protocol', error: describe(new Error(`unknown op ${req.op}`)) });
    return;
  }
  try {
    const out = await op(req);
    send({ id: req.id, ok: true, ...out });
  } catch (err) {
    const phase = err instanceof PhaseError ? err.phase : 'call';
    const cause = err instanceof PhaseError ? err.cause : err;
    const error = describe(cause);
    if (cause instanceof ResultError) error.resultError = true;
    send({ id: req.id, ok: false, phase, error });
  }
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  if (line.trim()) handle(line);
});
rl.on('close', () => process.exit(0));

send({
  ready: true, node: process.versions.node, pid: process.pid,
  stripsTypes: Boolean(process.features && process.features.typescript),
});
