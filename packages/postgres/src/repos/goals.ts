import type { Sql } from '../database';

export type GoalConfig =
  | { pathPattern: string }
  | { eventName: string; eventPropertyKey?: string; eventPropertyValue?: string | number };

export interface GoalRecord {
  goalId: number;
  siteId: number;
  name: string;
  goalType: 'path' | 'event';
  config: GoalConfig;
  createdAt: Date;
}

export interface GoalInput {
  name: string;
  goalType: 'path' | 'event';
  config: GoalConfig;
}

const COLUMNS = ['goal_id', 'site_id', 'name', 'goal_type', 'config', 'created_at'];

export async function createGoal(sql: Sql, siteId: number, input: GoalInput): Promise<GoalRecord> {
  const [row] = await sql<GoalRecord[]>`
    insert into goals (site_id, name, goal_type, config)
    values (${siteId}, ${input.name}, ${input.goalType}, ${sql.json(input.config)})
    returning ${sql(COLUMNS)}`;
  return row!;
}

/** Only a goal of this site is ever returned, updated or deleted. */
export async function getGoal(sql: Sql, siteId: number, goalId: number): Promise<GoalRecord | undefined> {
  const [row] = await sql<GoalRecord[]>`
    select ${sql(COLUMNS)} from goals where site_id = ${siteId} and goal_id = ${goalId}`;
  return row;
}

export async function listGoals(sql: Sql, siteId: number): Promise<GoalRecord[]> {
  return sql<GoalRecord[]>`select ${sql(COLUMNS)} from goals where site_id = ${siteId} order by goal_id`;
}

export async function updateGoal(
  sql: Sql,
  siteId: number,
  goalId: number,
  input: GoalInput,
): Promise<GoalRecord | undefined> {
  const [row] = await sql<GoalRecord[]>`
    update goals set name = ${input.name}, goal_type = ${input.goalType}, config = ${sql.json(input.config)}
    where site_id = ${siteId} and goal_id = ${goalId}
    returning ${sql(COLUMNS)}`;
  return row;
}

export async function deleteGoal(sql: Sql, siteId: number, goalId: number): Promise<boolean> {
  const rows =
    await sql`delete from goals where site_id = ${siteId} and goal_id = ${goalId} returning goal_id`;
  return rows.length > 0;
}
