/** API-key permissions of interface.md section 5, plus the read path of operator.md section 4. */
export const Permissions = [
  'users.track',
  'users.merge',
  'users.identify',
  'users.delete',
  'users.export.segment',
  'users.export.global_control_group',
  'users.export.ids',
  'subscription.status.set',
  'subscription.status.get',
  'email.status',
  'email.spam.remove',
  'email.bounce.remove',
] as const
export type Permission = (typeof Permissions)[number]
