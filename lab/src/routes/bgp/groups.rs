//! Which kernel nexthop object each route of a built-in agent's FIB points
//! at ([`Groups`]): one object per next hop, one group per distinct set of
//! next hops, shared by every route with that set. A top-of-rack switch's
//! thousands of prefixes, all spread over the same sixty uplinks, use one
//! group; when a sixty-first session comes up, every route moves to a new
//! group, checked once, instead of sixty gateways checked per route.
//!
//! Where the kernel spells out each route's next hops
//! (`nexthop_compat_mode` on, so that `ip route` shows them), a group is
//! never given new members in place (`ip nexthop replace`): the kernel
//! then tells of every route using the group again, walking the whole
//! table in one request under the lock every namespace's route changes
//! share (on the real HPN pod that held the other switches' writes and
//! sessions long enough for 185,000 hold timers to expire). With it off
//! the kernel tells nothing of those routes, and a set that grows or
//! shrinks for every route of a group is one request, not one a route
//! ([`Groups::in_place`]): while a fabric converges a top-of-rack
//! switch's prefix sets grow one uplink at a time.
//!
//! Pure: planned against the objects the kernel has now
//! ([`turbonet_host::kernel::nexthop::Objects`], read before every change set,
//! since the kernel removes a next hop whose port goes down and shrinks
//! its groups on its own), remembering only which prefix points where.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

use ipnet::Ipv4Net;

use turbonet_host::kernel::KernelHop;
use turbonet_host::kernel::nexthop::{Hop, Objects, Request};

/// What a route of a change set is written as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    /// Pointing at nexthop object `id`.
    Object(u32),
    /// With its next hops in the route: a next hop without a gateway (no
    /// group may hold one), or one whose object could not be made (its
    /// port went down meanwhile).
    Inline,
    /// Removed.
    Remove,
    /// Pointing at nexthop object `id` already, which holds the next hops
    /// wanted (the kernel shrank it when a port went down): not written.
    Kept(u32),
}

/// The objects a change set needs made first, and each route's target
/// (in the change set's order) once they are.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Plan {
    pub(super) setup: Vec<Request>,
    pub(super) targets: Vec<Target>,
}

/// The routes' objects, as this FIB wrote them.
#[derive(Debug, Default)]
pub(super) struct Groups {
    /// The object each prefix's route points at.
    uses: HashMap<Ipv4Net, u32>,
    /// How many routes point at each object.
    users: HashMap<u32, usize>,
    /// The groups this FIB made: the only ones it removes once unused
    /// (a restarted agent's predecessor's groups still carry its stale
    /// routes), and the only ones it gives new members.
    made: BTreeSet<u32>,
    /// Whether a group whose every route moves to one other set of next
    /// hops is given them in place ([`Groups::in_place`]).
    in_place: bool,
}

/// What a route of a change set asks for.
#[derive(Debug, Clone)]
enum Want {
    /// To be removed.
    Remove,
    /// Its next hops in the route ([`Target::Inline`]).
    Inline,
    /// To forward by these objects (ascending): one next hop is its own
    /// object, more a group's members.
    Members(Rc<[u32]>),
}

/// What a route with `hops` asks for, `object` giving (or making) a next
/// hop's object.
fn want(hops: &[KernelHop], mut object: impl FnMut(Hop) -> u32) -> Want {
    if hops.is_empty() {
        return Want::Remove;
    }
    let Some(hops) = hops
        .iter()
        .map(|h| {
            h.via.map(|via| Hop {
                via,
                ifindex: h.ifindex,
                onlink: h.onlink,
            })
        })
        .collect::<Option<Vec<Hop>>>()
    else {
        return Want::Inline;
    };
    let mut ids: Vec<u32> = hops.into_iter().map(&mut object).collect();
    ids.sort_unstable();
    ids.dedup();
    Want::Members(ids.into())
}

impl Groups {
    /// Groups that give every route of theirs new members in place
    /// ([`Groups::plan`]): for a kernel that then tells nothing of those
    /// routes (`nexthop_compat_mode` off).
    pub(super) fn in_place() -> Groups {
        Groups {
            in_place: true,
            ..Groups::default()
        }
    }

    /// The plan for `routes` (next hops by prefix; none: remove) given the
    /// kernel's `objects`: an existing object of the same content is
    /// reused, a missing one made with a fresh id.
    ///
    /// [`Groups::in_place`]: a group of this FIB's whose every route moves
    /// to the same other next hops (a set that grows or shrinks by a
    /// session) is given them in place, one request for all its routes,
    /// which stay as they are. So that a prefix's set can grow that way
    /// while a fabric converges, routes that reach a set together keep a
    /// group of their own: another group of this FIB's with the same
    /// members is not shared (a top-of-rack switch hears each remote rack's
    /// prefixes from its sixty uplinks one uplink at a time, and each
    /// rack's at its own pace).
    ///
    /// Routes that share one list of next hops (one allocation) are
    /// planned together.
    pub(super) fn plan<H: AsRef<[KernelHop]>>(
        &self,
        objects: &Objects,
        routes: &[(Ipv4Net, H)],
    ) -> Plan {
        let mut by_hop: HashMap<Hop, u32> = objects.hops.iter().map(|(&id, &h)| (h, id)).collect();
        let mut next = objects.max_id() + 1;
        let mut setup = Vec::new();
        // What each route wants, each distinct list worked out once.
        let mut members: HashMap<*const KernelHop, Want> = HashMap::new();
        let wants: Vec<Want> = routes
            .iter()
            .map(|(_, hops)| {
                let hops = hops.as_ref();
                members
                    .entry(hops.as_ptr())
                    .or_insert_with(|| {
                        want(hops, |hop| {
                            *by_hop.entry(hop).or_insert_with(|| {
                                setup.push(Request::Hop { id: next, hop });
                                next += 1;
                                next - 1
                            })
                        })
                    })
                    .clone()
            })
            .collect();
        let regroup = if self.in_place {
            self.regroups(objects, routes, &wants)
        } else {
            BTreeMap::new()
        };
        for (&id, members) in &regroup {
            setup.push(Request::Regroup {
                id,
                members: members.to_vec(),
            });
        }
        // Groups shared by content: this plan's own, and in place or not
        // the groups this FIB did not make (a restarted agent's
        // predecessor's); others' too when not in place.
        let mut by_members: HashMap<Rc<[u32]>, u32> = objects
            .groups
            .iter()
            .filter(|(id, _)| !self.in_place || !self.made.contains(id))
            .map(|(&id, members)| (members.as_slice().into(), id))
            .collect();
        let targets = routes
            .iter()
            .zip(wants)
            .map(|((prefix, _), want)| {
                let ids = match want {
                    Want::Remove => return Target::Remove,
                    Want::Inline => return Target::Inline,
                    Want::Members(ids) => ids,
                };
                if let [one] = *ids {
                    return Target::Object(one);
                }
                // Its group holds them already, or will.
                if let Some(&id) = self.uses.get(prefix)
                    && (regroup.get(&id) == Some(&ids)
                        || objects.groups.get(&id).is_some_and(|m| **m == *ids))
                {
                    return Target::Object(id);
                }
                Target::Object(*by_members.entry(ids).or_insert_with_key(|members| {
                    setup.push(Request::Group {
                        id: next,
                        members: members.to_vec(),
                    });
                    next += 1;
                    next - 1
                }))
            })
            .collect();
        Plan { setup, targets }
    }

    /// The groups of this FIB's whose every route `wants` the same other
    /// members, at least two: given them in place.
    fn regroups<H>(
        &self,
        objects: &Objects,
        routes: &[(Ipv4Net, H)],
        wants: &[Want],
    ) -> BTreeMap<u32, Rc<[u32]>> {
        // Per group: its routes here, and the members they all want
        // (`None`: they want different things).
        type Moving = (usize, Option<Rc<[u32]>>);
        let mut moving: HashMap<u32, Moving> = HashMap::new();
        for ((prefix, _), want) in routes.iter().zip(wants) {
            let Some(&id) = self.uses.get(prefix) else {
                continue;
            };
            if !self.made.contains(&id) {
                continue;
            }
            let wanted = match want {
                Want::Members(ids) if ids.len() > 1 => Some(ids.clone()),
                _ => None,
            };
            let (count, agreed) = moving.entry(id).or_insert((0, wanted.clone()));
            *count += 1;
            if *agreed != wanted {
                *agreed = None;
            }
        }
        moving
            .into_iter()
            .filter_map(|(id, (count, agreed))| {
                let members = agreed?;
                let now = objects.groups.get(&id)?;
                (self.users.get(&id) == Some(&count) && **now != *members).then_some((id, members))
            })
            .collect()
    }

    /// The plan for `routes` on a kernel without nexthop objects: every
    /// route inline.
    pub(super) fn inline<H: AsRef<[KernelHop]>>(routes: &[(Ipv4Net, H)]) -> Plan {
        Plan {
            setup: Vec::new(),
            targets: routes
                .iter()
                .map(|(_, hops)| {
                    if hops.as_ref().is_empty() {
                        Target::Remove
                    } else {
                        Target::Inline
                    }
                })
                .collect(),
        }
    }

    /// Records `plan` for `routes` once its setup was carried out with
    /// `outcomes` (one per setup request): a route whose object could not
    /// be made is written inline instead. Returns each route's target.
    pub(super) fn commit<H>(
        &mut self,
        routes: &[(Ipv4Net, H)],
        plan: Plan,
        outcomes: &[Result<(), i32>],
    ) -> Vec<Target> {
        let mut failed = BTreeSet::new();
        for (request, outcome) in plan.setup.iter().zip(outcomes) {
            match (request, outcome) {
                (Request::Hop { id, .. } | Request::Group { id, .. }, Err(_)) => {
                    failed.insert(*id);
                }
                (Request::Regroup { id, .. }, Err(_)) => {
                    failed.insert(*id);
                }
                (Request::Group { id, .. }, Ok(())) => {
                    self.made.insert(*id);
                }
                _ => {}
            }
        }
        // An object made by this change set may reuse the id of one the
        // kernel removed, with the routes that pointed at it.
        let made: BTreeSet<u32> = plan
            .setup
            .iter()
            .filter_map(|r| match r {
                Request::Hop { id, .. } | Request::Group { id, .. } => Some(*id),
                _ => None,
            })
            .collect();
        let mut targets = plan.targets;
        for ((prefix, _), target) in routes.iter().zip(&mut targets) {
            if let Target::Object(id) = target
                && failed.contains(id)
            {
                *target = Target::Inline;
            }
            if let Target::Object(id) = *target
                && !made.contains(&id)
                && self.uses.get(prefix) == Some(&id)
            {
                *target = Target::Kept(id);
                continue;
            }
            let now = match target {
                Target::Object(id) => self.uses.insert(*prefix, *id),
                _ => self.uses.remove(prefix),
            };
            if let Some(before) = now {
                self.unuse(before);
            }
            if let Target::Object(id) = target {
                *self.users.entry(*id).or_default() += 1;
            }
        }
        targets
    }

    /// `prefixes` were not written as planned (the kernel refused): what
    /// they point at is not known any more, so their next change writes
    /// them.
    pub(super) fn forget(&mut self, prefixes: &[Ipv4Net]) {
        for prefix in prefixes {
            if let Some(id) = self.uses.remove(prefix) {
                self.unuse(id);
            }
        }
    }

    /// One route fewer points at object `id`.
    fn unuse(&mut self, id: u32) {
        if let Some(n) = self.users.get_mut(&id) {
            *n -= 1;
            if *n == 0 {
                self.users.remove(&id);
            }
        }
    }

    /// The groups this FIB made that no route points at any more, to
    /// remove (forgotten here).
    pub(super) fn unused(&mut self) -> Vec<Request> {
        let (unused, used): (BTreeSet<u32>, BTreeSet<u32>) = std::mem::take(&mut self.made)
            .into_iter()
            .partition(|id| !self.users.contains_key(id));
        self.made = used;
        unused
            .into_iter()
            .map(|id| Request::Delete { id })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn hop(i: u8) -> KernelHop {
        KernelHop {
            via: Some(Ipv4Addr::new(10, 1, i, 1)),
            ifindex: 10 + u32::from(i),
            onlink: true,
        }
    }

    fn net(i: u8) -> Ipv4Net {
        Ipv4Net::new(Ipv4Addr::new(172, 16, i, 0), 24).unwrap()
    }

    /// Applies `plan`'s setup to `objects` as the kernel would.
    fn apply(objects: &mut Objects, plan: &Plan) -> Vec<Result<(), i32>> {
        plan.setup
            .iter()
            .map(|r| {
                match r {
                    Request::Hop { id, hop } => {
                        objects.hops.insert(*id, *hop);
                    }
                    Request::Group { id, members } | Request::Regroup { id, members } => {
                        objects.groups.insert(*id, members.clone());
                    }
                    Request::Delete { id } => {
                        objects.groups.remove(id);
                    }
                    Request::Route { .. } | Request::Unroute { .. } => {
                        unreachable!("no route in a setup")
                    }
                }
                Ok(())
            })
            .collect()
    }

    #[test]
    fn routes_with_one_set_share_one_group() {
        let mut groups = Groups::default();
        let mut kernel = Objects::default();
        let routes: Vec<_> = (0..100)
            .map(|i| (net(i), vec![hop(0), hop(1), hop(2)]))
            .collect();
        let plan = groups.plan(&kernel, &routes);
        assert_eq!(plan.setup.len(), 4, "three next hops and one group");
        let outcomes = apply(&mut kernel, &plan);
        let targets = groups.commit(&routes, plan, &outcomes);
        assert!(targets.iter().all(|t| *t == Target::Object(4)));
        assert!(groups.unused().is_empty());

        // A fourth session: every route moves to a new group; the old one
        // is unused and goes.
        let routes: Vec<_> = (0..100)
            .map(|i| (net(i), vec![hop(3), hop(0), hop(1), hop(2)]))
            .collect();
        let plan = groups.plan(&kernel, &routes);
        assert_eq!(
            plan.setup,
            vec![
                Request::Hop {
                    id: 5,
                    hop: Hop {
                        via: Ipv4Addr::new(10, 1, 3, 1),
                        ifindex: 13,
                        onlink: true
                    }
                },
                Request::Group {
                    id: 6,
                    members: vec![1, 2, 3, 5]
                }
            ]
        );
        let outcomes = apply(&mut kernel, &plan);
        groups.commit(&routes, plan, &outcomes);
        assert_eq!(groups.unused(), vec![Request::Delete { id: 4 }]);
    }

    /// `count` routes from `first` on, each over hops `0..width`.
    fn spread(first: u8, count: u8, width: u8) -> Vec<(Ipv4Net, Vec<KernelHop>)> {
        (first..first + count)
            .map(|i| (net(i), (0..width).map(hop).collect()))
            .collect()
    }

    /// Plans `routes`, carries the plan out in `kernel` and commits it.
    fn write(
        groups: &mut Groups,
        kernel: &mut Objects,
        routes: &[(Ipv4Net, Vec<KernelHop>)],
    ) -> (Vec<Request>, Vec<Target>) {
        let plan = groups.plan(kernel, routes);
        let setup = plan.setup.clone();
        let outcomes = apply(kernel, &plan);
        (setup, groups.commit(routes, plan, &outcomes))
    }

    #[test]
    fn in_place_a_set_that_grows_for_all_its_routes_is_one_request_and_no_route() {
        let mut groups = Groups::in_place();
        let mut kernel = Objects::default();
        // Two racks' prefixes heard from two uplinks: one group each (a
        // group of the same members is not shared in place).
        let (_, a) = write(&mut groups, &mut kernel, &spread(0, 10, 2));
        let (_, b) = write(&mut groups, &mut kernel, &spread(10, 10, 2));
        let (Target::Object(ga), Target::Object(gb)) = (a[0], b[0]) else {
            panic!("{a:?} {b:?}")
        };
        assert_ne!(ga, gb);
        // The first rack's prefixes heard from a third uplink: its group
        // is given the third hop in place, its routes are not written.
        let (setup, targets) = write(&mut groups, &mut kernel, &spread(0, 10, 3));
        let [
            Request::Hop { id: third, .. },
            Request::Regroup { id, members },
        ] = &setup[..]
        else {
            panic!("{setup:?}")
        };
        assert_eq!((*id, members.len()), (ga, 3));
        assert!(members.contains(third));
        assert!(
            targets.iter().all(|t| *t == Target::Kept(ga)),
            "{targets:?}"
        );
        assert_eq!(
            kernel.groups[&gb].len(),
            2,
            "the other rack's group is as it was"
        );
        // Half of the second rack's prefixes grow: their group cannot
        // change under the other half, so they move to a new one.
        let (setup, targets) = write(&mut groups, &mut kernel, &spread(10, 5, 3));
        let [Request::Group { id: fresh, .. }] = &setup[..] else {
            panic!("{setup:?}")
        };
        assert!(
            targets.iter().all(|t| *t == Target::Object(*fresh)),
            "{targets:?}"
        );
        // A set that shrinks for every route of its group: in place too.
        let (setup, targets) = write(&mut groups, &mut kernel, &spread(0, 10, 2));
        assert!(matches!(&setup[..], [Request::Regroup { id, .. }] if *id == ga));
        assert!(targets.iter().all(|t| *t == Target::Kept(ga)));
        assert!(groups.unused().is_empty());
        // Not in place (the kernel would tell each route again): the
        // routes move to a group of the members wanted.
        let mut shared = Groups::default();
        let mut kernel = Objects::default();
        write(&mut shared, &mut kernel, &spread(0, 10, 2));
        let (setup, targets) = write(&mut shared, &mut kernel, &spread(0, 10, 3));
        assert!(matches!(
            &setup[..],
            [Request::Hop { .. }, Request::Group { .. }]
        ));
        assert!(targets.iter().all(|t| matches!(t, Target::Object(_))));
    }

    #[test]
    fn a_group_not_given_its_members_has_its_routes_written_inline() {
        let mut groups = Groups::in_place();
        let mut kernel = Objects::default();
        let (_, targets) = write(&mut groups, &mut kernel, &spread(0, 4, 2));
        let Target::Object(group) = targets[0] else {
            panic!("{targets:?}")
        };
        let routes = spread(0, 4, 3);
        let plan = groups.plan(&kernel, &routes);
        assert!(matches!(plan.setup[1], Request::Regroup { id, .. } if id == group));
        // The kernel made the hop and refused the new members.
        let targets = groups.commit(&routes, plan, &[Ok(()), Err(libc::EINVAL)]);
        assert!(targets.iter().all(|t| *t == Target::Inline), "{targets:?}");
        assert_eq!(groups.unused(), vec![Request::Delete { id: group }]);
    }

    #[test]
    fn a_single_next_hop_is_its_own_object_and_removal_frees_groups() {
        let mut groups = Groups::default();
        let mut kernel = Objects::default();
        let routes = vec![
            (net(1), vec![hop(0)]),
            (net(2), vec![hop(0), hop(1)]),
            (
                net(3),
                vec![KernelHop {
                    via: None,
                    ifindex: 3,
                    onlink: false,
                }],
            ),
        ];
        let plan = groups.plan(&kernel, &routes);
        let outcomes = apply(&mut kernel, &plan);
        let targets = groups.commit(&routes, plan, &outcomes);
        assert_eq!(
            targets,
            vec![Target::Object(1), Target::Object(3), Target::Inline]
        );
        let gone = vec![(net(2), vec![])];
        let plan = groups.plan(&kernel, &gone);
        assert!(plan.setup.is_empty());
        let targets = groups.commit(&gone, plan, &[]);
        assert_eq!(targets, vec![Target::Remove]);
        assert_eq!(groups.unused(), vec![Request::Delete { id: 3 }]);
    }

    #[test]
    fn what_the_kernel_removed_is_made_again_and_failures_go_inline() {
        let mut groups = Groups::default();
        let mut kernel = Objects::default();
        let routes = vec![(net(1), vec![hop(0), hop(1)])];
        let plan = groups.plan(&kernel, &routes);
        let outcomes = apply(&mut kernel, &plan);
        groups.commit(&routes, plan, &outcomes);
        // Port 1 went down: the kernel removed its next hop and shrank the
        // group to port 0's.
        kernel.hops.remove(&2);
        kernel.groups.insert(3, vec![1]);
        // The session came back: hop 1 is made again, under a new id, and
        // so is a group of both (group 3 no longer is one).
        let plan = groups.plan(&kernel, &routes);
        assert_eq!(plan.setup.len(), 2);
        assert!(matches!(plan.setup[0], Request::Hop { id: 4, .. }));
        assert_eq!(
            plan.setup[1],
            Request::Group {
                id: 5,
                members: vec![1, 4]
            }
        );
        // Its port went down again before the hop was made.
        let targets = groups.commit(&routes, plan, &[Err(libc::ENETDOWN), Err(libc::EINVAL)]);
        assert_eq!(targets, vec![Target::Inline]);
        assert_eq!(groups.unused(), vec![Request::Delete { id: 3 }]);
    }

    #[test]
    fn a_predecessors_group_is_reused_never_removed() {
        let mut kernel = Objects::default();
        kernel.hops.insert(
            1,
            Hop {
                via: Ipv4Addr::new(10, 1, 0, 1),
                ifindex: 10,
                onlink: true,
            },
        );
        kernel.hops.insert(
            2,
            Hop {
                via: Ipv4Addr::new(10, 1, 1, 1),
                ifindex: 11,
                onlink: true,
            },
        );
        kernel.groups.insert(9, vec![1, 2]);
        let mut groups = Groups::default();
        let routes = vec![(net(1), vec![hop(1), hop(0)])];
        let plan = groups.plan(&kernel, &routes);
        assert!(plan.setup.is_empty());
        assert_eq!(plan.targets, vec![Target::Object(9)]);
        let plan_targets = groups.commit(&routes, plan, &[]);
        assert_eq!(plan_targets, vec![Target::Object(9)]);
        let gone = vec![(net(1), vec![])];
        let plan = groups.plan(&kernel, &gone);
        groups.commit(&gone, plan, &[]);
        assert!(groups.unused().is_empty());
    }

    #[test]
    fn a_route_already_on_the_group_the_kernel_shrank_is_not_written_again() {
        let mut groups = Groups::default();
        let mut kernel = Objects::default();
        let three: Vec<_> = (0..10)
            .map(|i| (net(i), vec![hop(0), hop(1), hop(2)]))
            .collect();
        let plan = groups.plan(&kernel, &three);
        let outcomes = apply(&mut kernel, &plan);
        let targets = groups.commit(&three, plan, &outcomes);
        let Target::Object(group) = targets[0] else {
            panic!("{targets:?}")
        };
        // The port of hop 2 goes down: the kernel removes the hop and
        // shrinks the group; the speaker then asks for two hops.
        let gone = *kernel.hops.iter().find(|(_, h)| h.ifindex == 12).unwrap().0;
        kernel.hops.remove(&gone);
        kernel
            .groups
            .get_mut(&group)
            .unwrap()
            .retain(|m| *m != gone);
        let two: Vec<_> = (0..10).map(|i| (net(i), vec![hop(0), hop(1)])).collect();
        let plan = groups.plan(&kernel, &two);
        assert!(plan.setup.is_empty(), "{:?}", plan.setup);
        let outcomes = apply(&mut kernel, &plan);
        let targets = groups.commit(&two, plan, &outcomes);
        assert!(
            targets.iter().all(|t| *t == Target::Kept(group)),
            "{targets:?}"
        );
        // A prefix the kernel refused is written at its next change.
        groups.forget(&[net(0)]);
        let plan = groups.plan(&kernel, &two[..1]);
        let outcomes = apply(&mut kernel, &plan);
        assert_eq!(
            groups.commit(&two[..1], plan, &outcomes),
            [Target::Object(group)]
        );
        assert!(groups.unused().is_empty());
    }

    #[test]
    fn an_object_made_again_with_an_old_id_is_written_to() {
        let mut groups = Groups::default();
        let mut kernel = Objects::default();
        let routes = vec![(net(0), vec![hop(0)])];
        let plan = groups.plan(&kernel, &routes);
        let outcomes = apply(&mut kernel, &plan);
        let targets = groups.commit(&routes, plan, &outcomes);
        assert_eq!(targets, [Target::Object(1)]);
        // The kernel removed hop 1 with the route; the same hop is made
        // again with the same id.
        kernel.hops.clear();
        let plan = groups.plan(&kernel, &routes);
        let outcomes = apply(&mut kernel, &plan);
        assert_eq!(groups.commit(&routes, plan, &outcomes), [Target::Object(1)]);
    }
}
