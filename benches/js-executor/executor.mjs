// A JavaScript rendering, for comparison, of the single-process tool executor design that
// toolguard's per-call figures are compared against: a JSON-schema validator, a sanitizer of
// four regular expressions, a `Map` as the idempotency cache, an array of audit entries (one
// object per event) and an approval threshold. It has no dependencies and runs in one process;
// nothing is persisted, sealed or chained.
//
// The validator checks what the compared schemas use: `type` (object, string, number, integer,
// boolean), `required`, `additionalProperties: false`, and per property `pattern`, `minLength`,
// `maxLength`, `enum`, `minimum` and `maximum`. Patterns are compiled once, when a tool is
// registered.

/** A tool's declaration: name, JSON schema of its arguments, handler, and whether it is idempotent. */
export function defineTool({ name, parameters, handler, idempotent = false, moves = null }) {
  return { name, parameters: compileSchema(parameters), handler, idempotent, moves };
}

function compileSchema(schema) {
  const properties = {};
  for (const [key, prop] of Object.entries(schema.properties ?? {})) {
    properties[key] = {
      ...prop,
      regex: prop.pattern === undefined ? null : new RegExp(prop.pattern, 'u'),
      allowed: prop.enum === undefined ? null : new Set(prop.enum),
    };
  }
  return {
    type: schema.type,
    properties,
    required: schema.required ?? [],
    additionalProperties: schema.additionalProperties !== false,
  };
}

function typeOk(type, value) {
  switch (type) {
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'integer':
      return typeof value === 'number' && Number.isInteger(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'object':
      return typeof value === 'object' && value !== null && !Array.isArray(value);
    default:
      return true;
  }
}

/** Validates `args` against a compiled schema; answers `{ valid, errors }`. */
export function validate(schema, args) {
  const errors = [];
  if (!typeOk('object', args)) {
    errors.push({ path: '', message: 'arguments must be an object' });
    return { valid: false, errors };
  }
  for (const key of schema.required) {
    if (!Object.hasOwn(args, key)) errors.push({ path: key, message: `${key} is required` });
  }
  for (const key of Object.keys(args)) {
    const prop = schema.properties[key];
    const value = args[key];
    if (prop === undefined) {
      if (!schema.additionalProperties) {
        errors.push({ path: key, message: `${key} is not allowed` });
      }
      continue;
    }
    if (prop.type !== undefined && !typeOk(prop.type, value)) {
      errors.push({ path: key, message: `${key} must be of type ${prop.type}` });
      continue;
    }
    if (typeof value === 'string') {
      const length = [...value].length;
      if (prop.maxLength !== undefined && length > prop.maxLength) {
        errors.push({ path: key, message: `${key} is longer than ${prop.maxLength}` });
      }
      if (prop.minLength !== undefined && length < prop.minLength) {
        errors.push({ path: key, message: `${key} is shorter than ${prop.minLength}` });
      }
      if (prop.regex !== null && !prop.regex.test(value)) {
        errors.push({ path: key, message: `${key} does not match ${prop.pattern}` });
      }
    }
    if (typeof value === 'number') {
      if (prop.minimum !== undefined && value < prop.minimum) {
        errors.push({ path: key, message: `${key} is below ${prop.minimum}` });
      }
      if (prop.maximum !== undefined && value > prop.maximum) {
        errors.push({ path: key, message: `${key} is above ${prop.maximum}` });
      }
    }
    if (prop.allowed !== null && !prop.allowed.has(value)) {
      errors.push({ path: key, message: `${key} is not one of ${prop.enum.join(', ')}` });
    }
  }
  return { valid: errors.length === 0, errors };
}

// Three kinds of marker block a call; invisible characters are removed.
const BLOCKING = [
  { name: 'sql_injection', regex: /('|--|;|\bOR\b\s+\d+\s*=\s*\d+)/i },
  { name: 'command_injection', regex: /(\$\(|`|&&|\|\|)/ },
  { name: 'prompt_injection', regex: /(<\/?system>|ignore\s+previous)/i },
];
const INVISIBLE = /[\u200B-\u200D]/g;

/** Checks every string argument; answers `{ blocked, reason, sanitized, stripped }`. */
export function sanitize(args) {
  const sanitized = {};
  let stripped = false;
  for (const [key, value] of Object.entries(args)) {
    if (typeof value !== 'string') {
      sanitized[key] = value;
      continue;
    }
    for (const { name, regex } of BLOCKING) {
      if (regex.test(value)) {
        return { blocked: true, reason: `${name} in ${key}`, sanitized: null, stripped };
      }
    }
    INVISIBLE.lastIndex = 0;
    if (INVISIBLE.test(value)) {
      INVISIBLE.lastIndex = 0;
      sanitized[key] = value.replace(INVISIBLE, '');
      stripped = true;
    } else {
      sanitized[key] = value;
    }
  }
  return { blocked: false, reason: null, sanitized, stripped };
}

/** The audit log: one object per event, pushed to an array. */
export class AuditLog {
  constructor() {
    this.entries = [];
  }

  record(actor, tool, event, details) {
    this.entries.push({ timestamp: Date.now(), actor, tool, event, ...details });
  }

  clear() {
    this.entries.length = 0;
  }
}

/** Accounts and balances the transfer moves. */
export class Bank {
  constructor() {
    this.balances = new Map();
    this.transfers = new Map();
  }

  execute(request, transferId) {
    const from = this.balances.get(request.from_account) ?? 0;
    const to = this.balances.get(request.to_account) ?? 0;
    this.balances.set(request.from_account, from - request.amount);
    this.balances.set(request.to_account, to + request.amount);
    const result = { transferId, status: 'completed', ...request };
    this.transfers.set(transferId, result);
    return result;
  }

  recordPending(request, transferId, approvalId) {
    const result = { transferId, status: 'pending', approvalId, ...request };
    this.transfers.set(transferId, result);
    return result;
  }

  balance(account) {
    return this.balances.get(account) ?? 0;
  }
}

/** Pending approvals; a transfer above the threshold (in cents) waits for one. */
export class Approvals {
  constructor(threshold) {
    this.threshold = threshold;
    this.pending = new Map();
  }

  requires(request) {
    return request.amount > this.threshold;
  }

  create(request, actor) {
    const approval = { id: crypto.randomUUID(), request, requestedBy: actor, state: 'pending' };
    this.pending.set(approval.id, approval);
    return approval;
  }
}

/** Runs every guard in order, stopping at the first refusal, then the handler. */
export class Executor {
  constructor({ tools, approvalThreshold = 1_000_000 }) {
    this.tools = new Map(tools.map((t) => [t.name, t]));
    this.audit = new AuditLog();
    this.idempotency = new Map();
    this.bank = new Bank();
    this.approvals = new Approvals(approvalThreshold);
  }

  /** `call` is `{ id, name, arguments }` with `arguments` the model's JSON text. */
  execute(call, actor) {
    this.audit.record(actor.userId, call.name, 'tool_call_received', { callId: call.id });
    const tool = this.tools.get(call.name);
    if (tool === undefined) {
      this.audit.record(actor.userId, call.name, 'unknown_tool', { callId: call.id });
      return { toolCallId: call.id, success: false, error: `unknown tool ${call.name}` };
    }
    let args;
    try {
      args = JSON.parse(call.arguments);
    } catch (e) {
      this.audit.record(actor.userId, call.name, 'validation_failed', { callId: call.id });
      return { toolCallId: call.id, success: false, error: `arguments are not JSON: ${e.message}` };
    }
    const validation = validate(tool.parameters, args);
    if (!validation.valid) {
      this.audit.record(actor.userId, call.name, 'validation_failed', {
        callId: call.id,
        errors: validation.errors,
      });
      const error = validation.errors.map((e) => e.message).join('; ');
      return { toolCallId: call.id, success: false, error: `Validation failed: ${error}` };
    }
    const clean = sanitize(args);
    if (clean.blocked) {
      this.audit.record(actor.userId, call.name, 'injection_blocked', {
        callId: call.id,
        reason: clean.reason,
      });
      return { toolCallId: call.id, success: false, error: `Request blocked: ${clean.reason}` };
    }
    if (tool.idempotent) return this.executeIdempotent(call, tool, clean.sanitized, actor);
    try {
      const result = tool.handler(clean.sanitized, this);
      this.audit.record(actor.userId, call.name, 'tool_call_completed', { callId: call.id });
      return { toolCallId: call.id, success: true, result };
    } catch (e) {
      this.audit.record(actor.userId, call.name, 'tool_call_failed', { callId: call.id });
      return { toolCallId: call.id, success: false, error: e.message };
    }
  }

  executeIdempotent(call, tool, args, actor) {
    const key = args.idempotency_key;
    const cached = this.idempotency.get(key);
    if (cached !== undefined) {
      this.audit.record(actor.userId, call.name, 'idempotency_hit', {
        callId: call.id,
        idempotencyKey: key,
      });
      return { toolCallId: call.id, success: true, result: cached };
    }
    const request = tool.moves(args);
    this.audit.record(actor.userId, call.name, 'transfer_initiated', {
      callId: call.id,
      amount: request.amount,
    });
    const transferId = crypto.randomUUID();
    if (this.approvals.requires(request)) {
      const approval = this.approvals.create(request, actor.userId);
      const pending = this.bank.recordPending(request, transferId, approval.id);
      this.idempotency.set(key, pending);
      this.audit.record(actor.userId, call.name, 'approval_requested', {
        callId: call.id,
        approvalId: approval.id,
      });
      return {
        toolCallId: call.id,
        success: true,
        result: pending,
        requiresApproval: true,
        approvalId: approval.id,
      };
    }
    try {
      const result = tool.handler(request, this, transferId);
      this.idempotency.set(key, result);
      this.audit.record(actor.userId, call.name, 'transfer_completed', {
        callId: call.id,
        transferId,
      });
      return { toolCallId: call.id, success: true, result };
    } catch (e) {
      // Not cached: a retry runs again.
      this.audit.record(actor.userId, call.name, 'transfer_rejected', {
        callId: call.id,
        error: e.message,
      });
      return { toolCallId: call.id, success: false, error: e.message };
    }
  }
}

const ACCOUNT = { type: 'string', pattern: '^[a-zA-Z0-9_-]+$', maxLength: 64 };

/** The low-risk read of the compared calls: one account argument. */
export const GET_BALANCE = defineTool({
  name: 'get_balance',
  parameters: {
    type: 'object',
    properties: { account: ACCOUNT },
    required: ['account'],
    additionalProperties: false,
  },
  handler: (args, executor) => executor.bank.balance(args.account),
});

/** The transfer of the compared calls: the same three fields and an idempotency key. */
export const TRANSFER = defineTool({
  name: 'transfer',
  parameters: {
    type: 'object',
    properties: {
      from_account: ACCOUNT,
      to_account: ACCOUNT,
      amount: { type: 'integer', minimum: 1, maximum: 100_000_000 },
      idempotency_key: { type: 'string', pattern: '^[a-zA-Z0-9_-]+$', maxLength: 128 },
    },
    required: ['from_account', 'to_account', 'amount', 'idempotency_key'],
    additionalProperties: false,
  },
  idempotent: true,
  moves: (args) => ({
    from_account: args.from_account,
    to_account: args.to_account,
    amount: args.amount,
  }),
  handler: (request, executor, transferId) => executor.bank.execute(request, transferId),
});
