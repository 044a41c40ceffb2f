// Input checking for the admin API: zod parsing that answers 400 with a message naming the
// first bad field, so every route reports bad input the same way.
import type { FastifyReply } from 'fastify';
import type { z } from 'zod';

/** Parses with zod or answers 400 naming the first bad field. Returns undefined when it answered. */
export function parseOr400<T extends z.ZodType>(schema: T, input: unknown, reply: FastifyReply): z.infer<T> | undefined {
  const parsed = schema.safeParse(input ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const where = issue && issue.path.length > 0 ? `${issue.path.join('.')}: ` : '';
  void reply.status(400).send({ error: `${where}${issue?.message ?? 'invalid input'}`, issues: parsed.error.issues });
  return undefined;
}
